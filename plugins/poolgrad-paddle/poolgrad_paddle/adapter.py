"""PaddlePaddle adapter: runs the call ``plan`` (poolgrad_paddle/__init__.py) makes of a spec, as a
paddle user writes it, in a poolgrad worker process.

dX is ``paddle.grad(y, x, grad_outputs=grad_output)``, i.e. d/dx sum(y * grad_output). The
channels_last variant hands paddle a channels-last input (transposed here, in NumPy) and
transposes its results back. bfloat16 arrays go through float32 both ways (exact: every
bfloat16 is a float32).

A call whose arguments paddle refuses is UNSUPPORTED with paddle's own message: paddle checks a
call's arguments in its Python API and in the op's InferMeta before any kernel runs, and both
raise ValueError (its InvalidArgument) or TypeError. What fails later, in a kernel (a dtype
without a CPU kernel is a RuntimeError, NotFound) or in the backward, is an ERROR. Whether the
arguments are refused is asked of the eager call, in every variant: a converted program
(to_static) checks each op's dtype against its kernels while it is built and raises TypeError
for a dtype that has none, which is the same missing kernel as eager's NotFound, not a refusal.
"""

from __future__ import annotations

import os

# glog warnings (a failing backward node is logged before it raises) are noise in the worker's stderr.
os.environ.setdefault("GLOG_minloglevel", "2")

import faulthandler  # noqa: E402
import signal  # noqa: E402
import types  # noqa: E402
import warnings  # noqa: E402
from typing import Any  # noqa: E402

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

with warnings.catch_warnings():  # paddle warns on import that no ccache is installed (C++ extensions)
    warnings.simplefilter("ignore")
    import paddle  # noqa: E402
    import paddle.nn.functional as F  # noqa: E402

# paddle's import installs a fatal-signal handler that formats a C++ traceback, allocating as it
# goes; after a heap corruption (the return_mask backward writes before its buffer, finding
# paddle-cpu-mask-no-candidate-writes-out-of-bounds) it deadlocks in malloc and the worker hangs
# until the case times out. The default action makes a crash a crash; faulthandler, where the
# worker turned it on, still writes the Python traceback first.
for _signal in (signal.SIGABRT, signal.SIGSEGV, signal.SIGFPE, signal.SIGBUS, signal.SIGILL):
    signal.signal(_signal, signal.SIG_DFL)
if faulthandler.is_enabled():  # its handlers sit under paddle's: registered again, above the default
    faulthandler.disable()
    faulthandler.enable()

from poolgrad.adapters import segments  # noqa: E402
from poolgrad.adapters.base import ERROR, NO_DEVICE, OK, UNSUPPORTED, Keywords, ModeMethods, Outcome, Unsupported  # noqa: E402

from . import ENV_SWITCHES, STATIC_VARIANTS, VARIANTS, function_name, plan  # noqa: E402
from .roi import ROI_VARIANTS, adapter as roi  # noqa: E402


def to_paddle(a: np.ndarray, place) -> paddle.Tensor:
    """NumPy (incl. ml_dtypes.bfloat16, which paddle.to_tensor does not take) -> tensor."""
    if a.dtype == ml_dtypes.bfloat16:
        return paddle.to_tensor(a.astype(np.float32), place=place).astype("bfloat16")
    return paddle.to_tensor(np.ascontiguousarray(a), place=place)


def to_numpy(t: paddle.Tensor) -> np.ndarray:
    """Tensor -> NumPy of the same dtype, values untouched."""
    if t.dtype == paddle.bfloat16:
        return t.astype("float32").numpy().astype(ml_dtypes.bfloat16)
    return np.ascontiguousarray(t.numpy())


def _fresh_code(fn):
    """A copy of ``fn`` with its own code object: paddle.jit caches a converted function per code
    object, and every pooling closure would share one."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def _flag(name: str):
    """A paddle flag's value, or None where this release has no such flag (get_flags raises)."""
    try:
        return paddle.get_flags([name])[name]
    except ValueError:
        return None


def _call(name: str, kw: Keywords):
    fn = getattr(F, name)

    def pool(t):
        return fn(t, **kw)
    return pool


def _segment_pool(call: segments.Segments):
    """paddle.geometric.segment_max / segment_mean over the (items, features) data."""
    fn = getattr(paddle.geometric, call.api)

    def pool(t):
        return fn(t, paddle.to_tensor(np.asarray(call.segment_ids, dtype=np.int64), place=t.place))
    return pool


def _refusal(pool, xt) -> Exception | None:
    """What paddle raised refusing the call's arguments, or None: the forward alone, without
    autograd, raises ValueError or TypeError (its Python API's checks, an op's InferMeta)."""
    try:
        pool(xt.detach())
    except (ValueError, TypeError) as refusal:
        return refusal
    except Exception:  # noqa: BLE001 - a kernel's failure is no refusal
        return None
    return None


def _reverse(pool, with_mask, xt, gt) -> dict:
    xt.stop_gradient = False
    out = pool(xt)
    y, mask = out if with_mask else (out, None)
    if y.shape != gt.shape:  # paddle pooled to another shape than the spec's: no gradient of the spec's to ask for
        return {"forward": y, "indices": mask}
    (dx,) = paddle.grad(y, xt, gt)
    return {"forward": y, "grad_input": dx, "indices": mask}


def _double_backward(pool, with_mask, xt, gt, v) -> dict:
    """paddle.grad with create_graph=True, then paddle.grad of sum(dX * v). paddle answers None
    for an input sum(dX * v) does not depend on (avg pooling's x): its zeros."""
    xt.stop_gradient = False
    gt.stop_gradient = False
    y = pool(xt)[0] if with_mask else pool(xt)
    if y.shape != gt.shape:  # as in _reverse
        return {}
    (dx,) = paddle.grad(y, xt, gt, create_graph=True)
    by_g, by_x = paddle.grad(dx, [gt, xt], v, allow_unused=True)
    return {"grad_input": dx, "grad_grad_output": paddle.zeros_like(gt) if by_g is None else by_g,
            "grad_grad_input": paddle.zeros_like(xt) if by_x is None else by_x}


_MODES = {"run": _reverse, "double_backward": _double_backward}


class PaddleAdapter(ModeMethods):
    framework = "paddle"
    variants = VARIANTS

    def __init__(self):
        self._static: dict[tuple, Any] = {}

    def version(self) -> str:
        return paddle.__version__

    def _gpu(self) -> bool:
        return paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0

    def devices(self) -> list[str]:
        return ["cpu", "gpu"] if self._gpu() else ["cpu"]

    def environment(self) -> dict[str, Any]:
        return {"paddle": paddle.__version__, "commit": paddle.version.commit,
                "onednn": paddle.base.core.is_compiled_with_mkldnn(), "cuda": paddle.version.cuda(),
                "flags": {f: str(v) for f in ENV_SWITCHES if f.startswith("FLAGS_") and (v := _flag(f)) is not None},
                "gpu_name": paddle.device.cuda.get_device_name(0) if self._gpu() else None}

    def jvp(self, spec, variant, device, x, grad_output, tangent) -> Outcome:
        return Outcome(UNSUPPORTED, message="paddle's forward mode (paddle.incubate.autograd.jvp) is double "
                                            "backward, which max pooling lacks; not run")

    def _mode(self, method, spec, variant, device, x, grad_output, *extra) -> Outcome:
        if variant not in VARIANTS and variant not in ROI_VARIANTS:
            raise ValueError(f"unknown paddle variant {variant!r}; known: {', '.join(VARIANTS)}")
        if device == "gpu" and not self._gpu():
            return Outcome(NO_DEVICE, message="paddle sees no CUDA device (the CPU wheel has none)")
        if variant in ROI_VARIANTS:  # RoI pooling, planned by the roi package (reverse mode only)
            return roi.run(spec, variant, device, x, grad_output)
        kw = plan(spec, variant, x.shape)
        if isinstance(kw, Unsupported):
            return Outcome(UNSUPPORTED, message=kw.reason)
        place = paddle.CUDAPlace(0) if device == "gpu" else paddle.CPUPlace()
        last = variant == "channels_last"
        rank = x.ndim - 2
        to_last, to_first = (0, *range(2, rank + 2), 1), (0, rank + 1, *range(1, rank + 1))
        segmented = isinstance(kw, segments.Segments)  # (items, features) data in and out
        if segmented:
            arrays = [segments.items(a) for a in (x, grad_output, *extra)]
        else:
            arrays = [np.ascontiguousarray(np.transpose(a, to_last)) if last else a for a in (x, grad_output, *extra)]
        tensors = [to_paddle(a, place) for a in arrays]
        name = kw.api if segmented else function_name(spec, x.shape)
        try:
            result = _MODES[method](self._pool(name, kw, variant, x), not segmented and "return_mask" in kw, *tensors)
        except Exception as e:  # whatever paddle raised is the result
            refusal = _refusal(self._pool(name, kw, "eager", x), tensors[0])
            if refusal is not None:
                return Outcome(UNSUPPORTED, message=f"{type(refusal).__name__}: {refusal}")
            return Outcome(ERROR, message=f"{type(e).__name__}: {e}")
        out = {k: to_numpy(t) for k, t in result.items() if t is not None}
        if last:  # the mask is paddle's NCHW plane index: return_mask never runs channels-last
            out = {k: np.ascontiguousarray(np.transpose(a, to_first)) for k, a in out.items()}
        outcome = Outcome(OK, info={"device_name": "cpu" if device == "cpu" else paddle.device.cuda.get_device_name(0)},
                          **out)
        return segments.as_planes(outcome, *x.shape[:2]) if segmented else outcome

    def _pool(self, name, kw, variant, x):
        """The call of ``name`` (a paddle.nn.functional or paddle.geometric function), converted to
        a static program in the static variants."""
        segmented = isinstance(kw, segments.Segments)
        call = _segment_pool(kw) if segmented else _call(name, kw)
        if variant not in STATIC_VARIANTS:
            return call
        # Keyed on what makes paddle build another program, so each entry converts once.
        key = (name, kw if segmented else tuple(sorted(kw.items())), x.shape, x.dtype.str)
        if key not in self._static:
            self._static[key] = paddle.jit.to_static(_fresh_code(call), full_graph=True)
        return self._static[key]


ADAPTER = PaddleAdapter()
