"""The plugin's knowledge base and reproducer: read by poolgrad as a plugin's files are."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import poolgrad_mindspore
from poolgrad.knowledge import sources
from poolgrad.cases.case_file import load_case_file
from poolgrad.reports import synthetic

FINDINGS = Path(poolgrad_mindspore.__file__).parent / "findings.toml"


def test_poolgrads_knowledge_base_holds_the_plugins_findings():
    mine = {f.id for f in sources.load() if f.framework == "mindspore"}
    assert mine and mine == {f.id for f in sources.load(FINDINGS, history=None)}


def test_each_example_is_a_case_file_naming_its_finding():
    with_examples = [f for f in sources.load(FINDINGS, history=None) if f.example is not None]
    assert with_examples
    for f in with_examples:
        assert load_case_file(f.example), f.id
        assert f.id in json.loads(f.example.read_text())["description"], f.id
        assert f.example.parent == FINDINGS.parent / "examples"


@pytest.mark.parametrize("variant", ["pynative", "jit", "nn"])
def test_the_reproducer_reprints_what_the_adapter_computed(variant, tmp_path):
    pytest.importorskip("mindspore")
    from poolgrad_mindspore.adapter import ADAPTER

    rec = synthetic.direct_tie(ADAPTER, "mindspore", variant)
    printed, stderr = synthetic.reprinted(rec, tmp_path)
    assert printed["gradient"]["actual"] == rec["grad_input"], stderr[-2000:]
    assert np.asarray(rec["grad_input"]).shape == synthetic.tie_case()[1].shape
