"""Release lanes of the paddle plugin: poolgrad's conformance catalogue against one PaddlePaddle
release at a time (the model is poolgrad's own noxfile.py, at the checkout's root).

Each lane is a fresh uv virtualenv holding poolgrad and this plugin (both from copies of the
checkout) plus exactly one paddlepaddle CPU release; it runs the paddle catalogue on CPU and
writes JSON-lines results to the checkout's out/lanes/<lane>.jsonl, beside poolgrad's own lanes
(poolgrad/suite/lanes.py runs every lane). Failing checks are
expected (pytest exit 1 counts as success); the results file is the product.

    cd plugins/poolgrad-paddle
    nox -l                                        # the lanes
    nox -s "lane(paddle-3.2.2)"                   # one lane
    nox -s "lane(paddle-3.3.1)" -- -k max_pool2d  # other arguments go to pytest

A lane's venv has no TensorFlow or JAX, so paddlepaddle's own requirements (opt_einsum==3.3.0)
install as they are.
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

nox.options.default_venv_backend = "uv"
nox.options.envdir = str(ROOT / "out" / "lanes" / ".nox")
nox.options.reuse_existing_virtualenvs = False
VARIANTS = "eager,channels_last,return_mask,to_static"
# lane id -> paddlepaddle release (CPU wheels on PyPI)
LANES = {f"paddle-{v}": v for v in ("2.6.2", "3.0.0", "3.2.2", "3.3.1")}


@nox.session(python="3.11")
@nox.parametrize("lane", [nox.param(lane, id=lane) for lane in LANES])
def lane(session: nox.Session, lane: str) -> None:
    # setuptools: paddle's import reaches it (paddle.utils.cpp_extension); uv's venvs have none.
    lanes.run(session, ROOT, lane, "paddle", VARIANTS, [f"paddlepaddle=={LANES[lane]}", "setuptools"], plugin=PLUGIN)
