"""Release lanes of the MLX plugin: poolgrad's catalogue against one MLX release at a time.

Each lane is a fresh virtualenv holding poolgrad, this plugin and exactly one MLX release (its
Linux CPU backend, mlx[cpu]); it runs the MLX catalogue on CPU and writes JSON-lines results to
the checkout's out/lanes/<lane>.jsonl, beside poolgrad's own lanes, so
`python -m poolgrad.suite.history build out/lanes/*.jsonl` measures the MLX findings too.
Failing checks are expected (pytest exit 1 counts as success); the results file is the product.

    nox -f plugins/poolgrad-mlx/noxfile.py -l                    # the lanes
    nox -f plugins/poolgrad-mlx/noxfile.py -s "lane(mlx-0.29.4)"  # one lane
    nox -f plugins/poolgrad-mlx/noxfile.py -s "lane(mlx-0.32.4)" -- -k max_pool2d   # arguments go to pytest
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

# lane id -> the MLX requirement. 0.29.4: before forward mode for reductions (Reduce::jvp came
# in 0.30.1); 0.32.4: the release the findings were written against.
LANES = {
    "mlx-0.29.4": "mlx[cpu]==0.29.4",
    "mlx-0.31.2": "mlx[cpu]==0.31.2",
    "mlx-0.32.4": "mlx[cpu]==0.32.4",
}


@nox.session(python="3.11")
@nox.parametrize("lane", [nox.param(lane, id=lane) for lane in LANES])
def lane(session: nox.Session, lane: str) -> None:
    lanes.run(session, ROOT, lane, "mlx", "eager,compile", [LANES[lane]], plugin=PLUGIN)
