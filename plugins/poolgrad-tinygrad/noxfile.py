"""Release lanes of the tinygrad plugin: poolgrad's catalogue against one tinygrad release at a time.

Each lane is a fresh virtualenv holding poolgrad, this plugin and exactly one tinygrad release; it
runs the tinygrad catalogue on its CPU device (clang must be installed) and writes JSON-lines
results to the checkout's out/lanes/<lane>.jsonl, beside poolgrad's own lanes. Failing checks are
expected (pytest exit 1 counts as success); the results file is the product. tinygrad lowers every
kernel in Python: a lane takes tens of minutes on 2 cores; `-- -k max_pool1d` runs a part.

    nox -f plugins/poolgrad-tinygrad/noxfile.py -l
    nox -f plugins/poolgrad-tinygrad/noxfile.py -s "lane(tinygrad-0.13.0)" -- -k "max_pool1d or avg_pool1d"
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = False

PLUGIN = Path(__file__).resolve().parent
ROOT = PLUGIN.parents[1]   # the poolgrad checkout this plugin lives in
nox.options.envdir = str(ROOT / "out" / "lanes" / ".nox")

# lane id -> the tinygrad requirement (0.14.0: the release the findings were written against)
LANES = {f"tinygrad-{v}": f"tinygrad=={v}" for v in ("0.12.0", "0.13.0", "0.14.0")}


@nox.session(python="3.11")
@nox.parametrize("lane", [nox.param(lane, id=lane) for lane in LANES])
def lane(session: nox.Session, lane: str) -> None:
    tmp = Path(session.create_tmp())
    # Installed from copies: building writes nothing (build/, *.egg-info) into the checkout.
    session.install(_copy(ROOT, tmp / "poolgrad-src"), _copy(PLUGIN, tmp / "plugin-src"), LANES[lane])
    results = ROOT / "out" / "lanes" / f"{lane}.jsonl"
    session.chdir(tmp)  # the installed poolgrad, not the checkout's, is the one pytest imports
    session.run("pytest", "--pyargs", "poolgrad", "--frameworks", "tinygrad", "--devices", "cpu",
                "-n", "2", "-q", "-p", "no:cacheprovider", "--results", str(results), *session.posargs,
                success_codes=[0, 1])
    records = [json.loads(line) for line in results.read_text().splitlines()]
    # Exit 1 also covers collection errors: insist on records of every variant.
    ran = {r["target"] for r in records if "target" in r}
    if not {"tinygrad-eager-cpu", "tinygrad-jit-cpu"} <= ran or not any(r.get("record") == "environment" for r in records):
        session.error(f"{results} is incomplete: targets {sorted(ran)}, or no environment record")
    session.log(f"{results}: {sum('verdict' in r for r in records)} result records")


def _copy(src: Path, dest: Path) -> str:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".nox", "out", "plugins", "build", "*.egg-info", "__pycache__", ".hypothesis"))
    return str(dest)
