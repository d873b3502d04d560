"""The conformance run: target selection, batched execution, verdicts against expectations,
records. poolgrad/plugin.py wires these into pytest hooks; nothing here imports a framework."""
