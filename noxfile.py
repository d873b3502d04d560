"""Release lanes: the poolgrad conformance catalogue against one framework release at a time.

Each lane is a fresh uv virtualenv holding poolgrad plus exactly one framework release; it runs
that framework's CPU catalogue and writes JSON-lines results to out/lanes/<lane>.jsonl.
Failing checks are expected (pytest exit 1 counts as success); the results file is the product.

    nox -l                                        # list the lanes
    nox -s "lane(jax-0.10.2)"                     # one lane
    nox -s lane                                   # every lane, one after another
    nox -s "lane(torch-2.13.0)" -- compile        # also torch.compile (cold inductor: 10+ min)
    POOLGRAD_LANE_COMPILE=1 nox -s "lane(torch-2.13.0)"   # the same, by environment
    nox -s "lane(jax-0.10.2)" -- -k max_pool2d    # other arguments go to pytest

Virtualenvs live in out/lanes/.nox; poolgrad is installed from a copy of the checkout, so
building it writes nothing (build/, *.egg-info) into the working tree.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
# The lane runner of this checkout: nox runs in an environment of its own, where poolgrad need
# not be installed (poolgrad/__init__.py and suite/__init__.py import nothing).
sys.path.insert(0, str(ROOT))
from poolgrad.suite import lanes  # noqa: E402

nox.options.default_venv_backend = "uv"
nox.options.envdir = "out/lanes/.nox"
nox.options.reuse_existing_virtualenvs = False

VARIANTS = {
    "torch": "eager,channels_last,module,return_indices",  # + compile when asked (see docstring)
    "tensorflow": "eager,function,xla,keras,with_argmax",
    "jax": "eager,jit",
}

TF = ["tensorflow-cpu==2.21.0"]  # constraints/cpu.txt's TF, for the oneDNN ISA lanes

# lane id -> (framework, install arguments, extra environment)
LANES = {
    "jax-0.7.2": ("jax", ["jax==0.7.2", "jaxlib==0.7.2"], {}),
    "jax-0.8.3": ("jax", ["jax==0.8.3", "jaxlib==0.8.3"], {}),
    "jax-0.9.2": ("jax", ["jax==0.9.2", "jaxlib==0.9.2"], {}),
    "jax-0.10.2": ("jax", ["jax==0.10.2", "jaxlib==0.10.2"], {}),
    # tensorflow-cpu brings a compatible keras; the resolver picks it.
    "tensorflow-2.18.1": ("tensorflow", ["tensorflow-cpu==2.18.1"], {}),
    "tensorflow-2.19.1": ("tensorflow", ["tensorflow-cpu==2.19.1"], {}),
    "tensorflow-2.20.0": ("tensorflow", ["tensorflow-cpu==2.20.0"], {}),
    "tensorflow-2.21.0": ("tensorflow", TF, {}),
    # What an older CPU gets: oneDNN capped to an ISA, or oneDNN off.
    "tensorflow-2.21.0-isa-avx2": ("tensorflow", TF, {"ONEDNN_MAX_CPU_ISA": "AVX2"}),
    "tensorflow-2.21.0-isa-avx512_core": ("tensorflow", TF, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}),
    "tensorflow-2.21.0-onednn-off": ("tensorflow", TF, {"TF_ENABLE_ONEDNN_OPTS": "0"}),
    # PyPI's torch wheels are CUDA builds (several GB; uv's cache shares the nvidia wheels);
    # they run on CPU. 2.13.0 is the CPU wheel in /opt/wheels.
    "torch-2.10.0": ("torch", ["torch==2.10.0"], {}),
    "torch-2.11.0": ("torch", ["torch==2.11.0"], {}),
    "torch-2.12.1": ("torch", ["torch==2.12.1"], {}),
    "torch-2.13.0": ("torch", ["--find-links", "/opt/wheels", "torch==2.13.0+cpu"], {}),
    "torch-2.14.1": ("torch", ["torch==2.14.1"], {}),
    "torch-2.15.0": ("torch", ["torch==2.15.0"], {}),
}


@nox.session(python="3.11")
@nox.parametrize("lane", [nox.param(lane, id=lane) for lane in LANES])
def lane(session: nox.Session, lane: str) -> None:
    framework, requirements, env = LANES[lane]
    variants = VARIANTS[framework]
    if framework == "torch" and ("compile" in session.posargs or os.environ.get("POOLGRAD_LANE_COMPILE") == "1"):
        variants, lane = variants + ",compile", f"{lane}-compile"
    session.posargs[:] = [a for a in session.posargs if a != "compile"]
    lanes.run(session, ROOT, lane, framework, variants, requirements, env=env)


@nox.session(python="3.11")
def installed(session: nox.Session) -> None:
    """poolgrad as users install it: a wheel of the checkout (not editable) and one framework
    (JAX), then the suite from an empty directory, where no checkout file can be imported."""
    session.install(lanes.copy(ROOT, Path(session.create_tmp()) / "poolgrad-src"), "jax", "jaxlib")
    empty = os.path.join(session.create_tmp(), "empty")
    os.makedirs(empty, exist_ok=True)
    session.chdir(empty)
    session.run("poolgrad", "--help", silent=True)
    # a framework named but not installed: a usage error (exit 4), not a green run of skips
    session.run("poolgrad", "--frameworks", "torch", success_codes=[4], silent=True)
    session.run("pytest", "--pyargs", "poolgrad", "-q", "-p", "no:cacheprovider", "--frameworks", "jax",
                "--variants", "eager,jit", "-k", "max_pool1d and ties_window", "--results", "r.jsonl",
                *session.posargs)
