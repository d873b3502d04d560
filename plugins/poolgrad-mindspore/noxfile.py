"""Release lanes of the mindspore plugin: poolgrad's conformance catalogue against one MindSpore
release at a time (the model is poolgrad's own noxfile.py, at the checkout's root).

Each lane is a fresh virtualenv holding poolgrad and this plugin (both from copies of the
checkout) plus exactly one mindspore CPU release and NumPy 1.x (mindspore's C++ extension is built
against NumPy 1.x; README.md); it runs the mindspore catalogue on CPU and writes JSON-lines results
to the checkout's out/lanes/<lane>.jsonl, beside poolgrad's own lanes. Failing checks are expected
(pytest exit 1 counts as success); the results file is the product.

    nox -f plugins/poolgrad-mindspore/noxfile.py -l
    nox -f plugins/poolgrad-mindspore/noxfile.py -s "lane(mindspore-2.9.0)" -- -k max_pool2d
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

PLUGIN = Path(__file__).resolve().parent
ROOT = PLUGIN.parents[1]   # the poolgrad checkout this plugin lives in
# its lane runner: nox runs in an environment of its own, where poolgrad need not be installed
sys.path.insert(0, str(ROOT))
from poolgrad.suite import lanes  # noqa: E402

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.envdir = str(ROOT / "out" / "lanes" / ".nox")
nox.options.reuse_existing_virtualenvs = False
VARIANTS = "pynative,jit,return_indices,nn,mint"
# lane id -> mindspore release (CPU wheels for CPython 3.11 on PyPI)
LANES = {f"mindspore-{v}": v for v in ("2.9.0", "2.10.0")}


@nox.session(python="3.11")
@nox.parametrize("lane", [nox.param(lane, id=lane) for lane in LANES])
def lane(session: nox.Session, lane: str) -> None:
    lanes.run(session, ROOT, lane, "mindspore", VARIANTS, [f"mindspore=={LANES[lane]}", "numpy<2"], plugin=PLUGIN)
