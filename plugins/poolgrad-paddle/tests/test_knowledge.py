"""The plugin's knowledge base and reproducer: read by poolgrad as a plugin's files are."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import poolgrad_paddle
from poolgrad.cases.case_file import load_case_file
from poolgrad.knowledge import sources
from poolgrad.reports import synthetic

FINDINGS = Path(poolgrad_paddle.__file__).parent / "findings.toml"


def test_poolgrads_knowledge_base_holds_the_plugins_findings():
    mine = {f.id for f in sources.load() if f.framework == "paddle"}
    assert mine and mine == {f.id for f in sources.load(FINDINGS, history=None)}


def test_a_finding_of_older_releases_is_bounded_by_the_lanes_history():
    """float16 pool2d/pool3d kernels came with 3.3.1: the 3.0.0 lane holds the finding, the 3.3.1
    lane contradicts it, so the knowledge base scopes it to older releases."""
    f = next(f for f in sources.load() if f.id == "paddle-cpu-pool-float16-no-kernel")
    assert str(f.versions) == "<3.3.1"


def test_each_example_is_a_case_file_naming_its_finding():
    with_examples = [f for f in sources.load(FINDINGS, history=None) if f.example is not None]
    assert with_examples
    for f in with_examples:
        assert load_case_file(f.example), f.id
        assert f.id in json.loads(f.example.read_text())["description"], f.id
        assert f.example.parent == FINDINGS.parent / "examples"


@pytest.mark.parametrize("variant", ["eager", "channels_last", "return_mask", "to_static"])
def test_the_reproducer_reprints_what_the_adapter_computed(variant, tmp_path):
    pytest.importorskip("paddle")
    from poolgrad_paddle.adapter import ADAPTER

    rec = synthetic.direct_tie(ADAPTER, "paddle", variant)
    printed, stderr = synthetic.reprinted(rec, tmp_path)
    assert printed["gradient"]["actual"] == rec["grad_input"], stderr[-2000:]
    assert np.asarray(rec["grad_input"]).shape == synthetic.tie_case()[1].shape
