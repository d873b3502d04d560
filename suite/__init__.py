"""The conformance run: target selection, batched execution, verdicts against expectations,
records. conftest.py wires these into pytest hooks; nothing here imports a framework."""
