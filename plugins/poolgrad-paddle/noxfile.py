"""Release lanes of the paddle plugin: poolgrad's conformance catalogue against one PaddlePaddle
release at a time (the model is poolgrad's own noxfile.py, at the checkout's root).

Each lane is a fresh uv virtualenv holding poolgrad and this plugin (both from copies of the
checkout) plus exactly one paddlepaddle CPU release; it runs the paddle catalogue on CPU and
writes JSON-lines results to out/lanes/<lane>.jsonl under this directory. Failing checks are
expected (pytest exit 1 counts as success); the results file is the product.

    cd plugins/poolgrad-paddle
    nox -l                                        # the lanes
    nox -s "lane(paddle-3.2.2)"                   # one lane
    nox -s "lane(paddle-3.3.1)" -- -k max_pool2d  # other arguments go to pytest

A lane's venv has no TensorFlow or JAX, so paddlepaddle's own requirements (opt_einsum==3.3.0)
install as they are.
"""

from __future__ import annotations

import json
import os
import shutil

import nox

nox.options.default_venv_backend = "uv"
nox.options.envdir = "out/lanes/.nox"
nox.options.reuse_existing_virtualenvs = False

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the poolgrad checkout holding plugins/
OUT = os.path.join(HERE, "out", "lanes")
VARIANTS = "eager,channels_last,return_mask,to_static"
# lane id -> paddlepaddle release (CPU wheels on PyPI)
LANES = {f"paddle-{v}": v for v in ("2.6.2", "3.0.0", "3.2.2", "3.3.1")}


@nox.session(python="3.11")
@nox.parametrize("lane", [nox.param(lane, id=lane) for lane in LANES])
def lane(session: nox.Session, lane: str) -> None:
    # setuptools: paddle's import reaches it (paddle.utils.cpp_extension); uv's venvs have none.
    session.install("--compile-bytecode", _copy(session, ROOT, "poolgrad-src"), _copy(session, HERE, "plugin-src"),
                    f"paddlepaddle=={LANES[lane]}", "setuptools")
    os.makedirs(OUT, exist_ok=True)
    results = os.path.join(OUT, f"{lane}.jsonl")
    session.chdir(session.create_tmp())  # the installed packages, not the checkout's files
    session.run(
        "pytest", "--pyargs", "poolgrad.conformance",
        "--frameworks", "paddle", "--variants", VARIANTS, "--devices", "cpu",
        "-n", "2", "--dist", "loadgroup", "-q", "-p", "no:cacheprovider",
        "--results", results, "--compile-cache", "none",
        "--findings", os.path.join(HERE, "poolgrad_paddle", "lanes.toml"),
        *session.posargs,
        success_codes=[0, 1],
    )
    # Exit 1 also covers collection errors: insist on records for every variant and the
    # environment record.
    with open(results) as f:
        records = [json.loads(line) for line in f]
    ran = {r["target"].split("-", 1)[1].rpartition("-")[0] for r in records if "target" in r}
    missing = set(VARIANTS.split(",")) - ran
    if not any(r.get("record") == "environment" for r in records) or missing:
        session.error(f"{results} is incomplete: no records for {sorted(missing)} or no environment record")
    session.log(f"{results}: {sum('verdict' in r for r in records)} result records")


def _copy(session: nox.Session, src: str, name: str) -> str:
    """A copy of a source tree to install from, so building writes nothing into the checkout."""
    dest = os.path.join(session.create_tmp(), name)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".nox", "out", "build", "*.egg-info", "__pycache__", ".hypothesis", "plugins"))
    return dest
