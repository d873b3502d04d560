"""Helpers shared by the test directories (repro_runs.py) live here: pytest puts this conftest's
directory on sys.path, so every test module can import them."""
