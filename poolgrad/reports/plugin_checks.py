"""What a framework plugin's own tests check of its knowledge and its reproducer, the same for
every plugin, called with its framework name: poolgrad's knowledge base holds the findings of its
package, each of their examples is a case file naming its finding, and the reproducer of a record
reprints the gradient the adapter computed. Its registration's checks are
poolgrad/adapters/plugin_checks.py; these read the knowledge base and write reproducers, layers
the adapters may not import."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np

from poolgrad.adapters import registry
from poolgrad.adapters.base import OK
from poolgrad.cases.case_file import load_case_file
from poolgrad.knowledge import sources
from poolgrad.reference import PoolSpec

from . import synthetic


def _findings_file(name: str) -> Path:
    """The findings file of the package that plans framework ``name``."""
    return sources.framework_packages()[name] / "findings.toml"


def assert_the_knowledge_base_holds_its_findings(name: str) -> None:
    """poolgrad's knowledge base, read from every installed framework package, holds exactly the
    findings of ``name``'s package (none of them lost, none of another framework's claimed)."""
    own = {f.id for f in sources.load(_findings_file(name), history=None)}
    assert own, f"{_findings_file(name)} holds no finding"
    assert {f.id for f in sources.load() if f.framework == name} == own


def assert_each_example_is_a_case_file_naming_its_finding(name: str) -> None:
    """Every example of ``name``'s findings is a case file poolgrad loads, in the package's
    examples/, whose description names the finding."""
    path = _findings_file(name)
    with_examples = [f for f in sources.load(path, history=None) if f.example is not None]
    assert with_examples, f"{path}: no finding has an example"
    for f in with_examples:
        assert load_case_file(f.example), f.id
        assert f.id in json.loads(f.example.read_text())["description"], f"{f.example.name} does not name {f.id}"
        assert f.example.parent == path.parent / "examples", f"{f.id}: its example is outside {path.parent / 'examples'}"


def _two_channel_ties(dtype: str):
    """synthetic.tie_case with a second channel, its input transposed and its upstream gradient
    16 times larger (exact in every dtype): a reproducer that mixed up channels or planes (a
    layout it transposes) prints another gradient."""
    spec, x, g = synthetic.tie_case(dtype)
    return spec, np.concatenate([x, x.swapaxes(-1, -2)], axis=1), np.concatenate([g, g * 16], axis=1)


def assert_the_reproducer_reprints_what_the_adapter_computed(name: str, variant: str, directory: Path,
                                                               dtype: str = "float32") -> None:
    """The reproducer of the record of what ``name``'s adapter computes on ``variant`` for ties
    (_two_channel_ties in ``dtype``, on the CPU), run as a user runs it in ``directory``, prints
    that very gradient."""
    adapter = importlib.import_module(registry.get(name).worker(variant).module).ADAPTER
    spec, x, g = _two_channel_ties(dtype)
    out = adapter.run(PoolSpec.from_dict(spec), variant, "cpu", x, g)
    assert out.status == OK and out.grad_input.shape == x.shape, f"{name} {variant}: {out.status} {out.message}"
    rec = synthetic.result(f"tie-{variant}", "ties_overlap", spec, x, g, framework=name, variant=variant,
                           run_id="direct", grad_input=out.grad_input, version=adapter.version())
    printed, stderr = synthetic.reprinted(rec, directory)
    assert printed.get("gradient", {}).get("actual") == rec["grad_input"], stderr[-2000:]
