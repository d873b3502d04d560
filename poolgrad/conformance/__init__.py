"""The conformance tests: every case of the catalogue (or --case-file) on every selected
target (``pytest --pyargs poolgrad`` or ``poolgrad`` run them from anywhere)."""
