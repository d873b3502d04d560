"""Fixtures of the reports tests (recorded results: see reports_recorded.py)."""

import pytest
from reports_recorded import run_records, write


@pytest.fixture
def run_file(tmp_path):
    return write(tmp_path / "run.jsonl", run_records())
