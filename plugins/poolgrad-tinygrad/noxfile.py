"""Release lanes of the tinygrad plugin: poolgrad's catalogue against one tinygrad release at a time.

Each lane is a fresh virtualenv holding poolgrad, this plugin and exactly one tinygrad release; it
runs the tinygrad catalogue on its CPU device (clang must be installed) and writes JSON-lines
results to the checkout's out/lanes/<lane>.jsonl, beside poolgrad's own lanes. Failing checks are
expected (pytest exit 1 counts as success); the results file is the product. `-- -k max_pool1d`
runs a part.

    nox -f plugins/poolgrad-tinygrad/noxfile.py -l
    nox -f plugins/poolgrad-tinygrad/noxfile.py -s "lane(tinygrad-0.13.0)" -- -k "max_pool1d or avg_pool1d"
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = False

PLUGIN = Path(__file__).resolve().parent
ROOT = PLUGIN.parents[1]   # the poolgrad checkout this plugin lives in
# its lane runner: nox runs in an environment of its own, where poolgrad need not be installed
sys.path.insert(0, str(ROOT))
from poolgrad.suite import lanes  # noqa: E402

nox.options.envdir = str(ROOT / "out" / "lanes" / ".nox")

# lane id -> the tinygrad requirement (0.14.0: the release the findings were written against)
LANES = {f"tinygrad-{v}": f"tinygrad=={v}" for v in ("0.12.0", "0.13.0", "0.14.0")}


@nox.session(python="3.11")
@nox.parametrize("lane", [nox.param(lane, id=lane) for lane in LANES])
def lane(session: nox.Session, lane: str) -> None:
    lanes.run(session, ROOT, lane, "tinygrad", "eager,jit", [LANES[lane]], plugin=PLUGIN)
