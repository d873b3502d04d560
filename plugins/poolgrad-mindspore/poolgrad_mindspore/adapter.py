"""MindSpore adapter: runs the call ``plan`` (poolgrad_mindspore/__init__.py) makes of a spec, as a
MindSpore user writes it, in a poolgrad worker process.

The forward and dX come from one call of ``mindspore.value_and_grad(pool, grad_position=0,
sens_param=True)(x, grad_output)``: the VJP with the given upstream gradient (with
return_indices the sensitivity of the indices is zero). ``jit`` runs that step under
``mindspore.jit`` (graph mode), compiled once per function, arguments, shape and dtype. bfloat16
arrays go through float32 both ways (exact: every bfloat16 is a float32).

A call whose arguments MindSpore refuses is UNSUPPORTED with its message: MindSpore checks a
call's argument values in Python and in the primitive's shape inference, and raises ValueError.
Whatever else fails (a dtype no kernel is registered for is a TypeError of the primitive's dtype
check, a kernel missing on this device a RuntimeError) is an ERROR.
"""

from __future__ import annotations

import os

# MindSpore's own log (its C++ GLOG) writes warnings of every call to stderr; errors only.
os.environ.setdefault("GLOG_v", "3")

from typing import Any  # noqa: E402

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import mindspore as ms  # noqa: E402
from mindspore import mint, nn, ops  # noqa: E402

from poolgrad.adapters.base import ERROR, NO_DEVICE, OK, UNSUPPORTED, Keywords, Outcome, Unsupported  # noqa: E402

from . import ENV_SWITCHES, VARIANTS, api, function_name, plan  # noqa: E402

ms.set_device("CPU")
MODULES = {"ops": ops, "nn": nn, "mint": mint.nn.functional}


def to_mindspore(a: np.ndarray) -> ms.Tensor:
    """NumPy (incl. ml_dtypes.bfloat16, which mindspore.Tensor does not take) -> tensor."""
    if a.dtype == ml_dtypes.bfloat16:
        return ms.Tensor(a.astype(np.float32)).astype(ms.bfloat16)
    return ms.Tensor(np.ascontiguousarray(a))


def to_numpy(t: ms.Tensor) -> np.ndarray:
    """Tensor -> NumPy of the same dtype, values untouched."""
    if t.dtype == ms.bfloat16:
        return t.astype(ms.float32).asnumpy().astype(ml_dtypes.bfloat16)
    return np.ascontiguousarray(t.asnumpy())


def pooling(where: str, name: str, kw: Keywords):
    """The forward as users write it: a function of mindspore.ops / mint.nn.functional, or a cell.
    The keywords as a plain dict: graph mode (mindspore.jit) unpacks only a tuple, list or dict."""
    kw = dict(kw)
    if where == "nn":
        return getattr(nn, name)(**kw)
    fn = getattr(MODULES[where], name)

    def pool(t):
        return fn(t, **kw)
    return pool


def step(pool):
    """The forward and its VJP with the upstream gradient ``sens``."""
    value_and_grad = ms.value_and_grad(pool, grad_position=0, sens_param=True)

    def run(x, sens):
        return value_and_grad(x, sens)
    return run


class MindSporeAdapter:
    framework = "mindspore"
    variants = VARIANTS

    def __init__(self):
        self._jitted: dict[tuple, Any] = {}

    def version(self) -> str:
        return ms.__version__

    def devices(self) -> list[str]:
        return ["cpu"]  # the CPU wheel; MindSpore's GPU build is another package (README.md)

    def environment(self) -> dict[str, Any]:
        return {"mindspore": ms.__version__, "numpy": np.__version__, "device_target": ms.get_context("device_target"),
                **{k: os.environ[k] for k in ENV_SWITCHES if k in os.environ}}

    def run(self, spec, variant, device, x, grad_output) -> Outcome:
        kw = plan(spec, variant, x.shape)  # raises for an unknown variant
        if device != "cpu":
            return Outcome(NO_DEVICE, message="the mindspore CPU wheel has no GPU backend")
        if isinstance(kw, Unsupported):
            return Outcome(UNSUPPORTED, message=kw.reason)
        name = function_name(spec, variant, x.ndim - 2)
        xt, gt = to_mindspore(x), to_mindspore(grad_output)
        try:
            pool = pooling(api(variant), name, kw)  # a cell checks its arguments here
            if kw.get("return_indices"):
                y, idx = pool(xt)
                (y, idx), dx = self._step(variant, pool, name, kw, x)(xt, (gt, ops.zeros_like(idx)))
            else:
                idx = None
                y, dx = self._step(variant, pool, name, kw, x)(xt, gt)
        except ValueError as e:  # MindSpore refused the arguments
            return Outcome(UNSUPPORTED, message=f"ValueError: {e}")
        except Exception as e:  # whatever else MindSpore raised is the result
            return Outcome(ERROR, message=f"{type(e).__name__}: {e}")
        return Outcome(OK, forward=to_numpy(y), grad_input=to_numpy(dx),
                       indices=None if idx is None else to_numpy(idx), info={"device_name": "cpu"})

    def _step(self, variant, pool, name, kw, x):
        if variant != "jit":
            return step(pool)
        # one graph per function, arguments, shape and dtype: what makes MindSpore compile another
        key = (name, tuple(sorted(kw.items())), x.shape, x.dtype.str)
        if key not in self._jitted:
            self._jitted[key] = ms.jit(step(pool))
        return self._jitted[key]


ADAPTER = MindSporeAdapter()
