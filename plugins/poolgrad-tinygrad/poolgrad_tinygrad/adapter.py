"""tinygrad adapter: runs the call ``plan`` (poolgrad_tinygrad/__init__.py) makes of a spec, as a
tinygrad user calls it, in a worker process, on tinygrad's CPU device (C kernels compiled by clang).

Channels-first like poolgrad, so no transposes. The gradient is tinygrad's autograd as users read
it: ``y.backward(grad_output)``, then ``x.grad``; the ``gradient`` variant asks
``y.gradient(x, gradient=grad_output)`` instead.
float16, float32 and float64 NumPy arrays become tensors as they are; bfloat16 (ml_dtypes, which
tinygrad does not read) goes through float32, which holds it exactly, and back.

Before tinygrad is imported: its compiled kernels are cached in SQLite (CACHEDB), under the run's
compile cache (the framework record's worker environment; with --compile-cache none, a file of
this process's own, cold), and kernels compile in this process (PARALLEL=0: poolgrad already runs
one worker per core). A value the user set wins.
"""

from __future__ import annotations

import os
import tempfile

if "CACHEDB" not in os.environ:
    os.environ["CACHEDB"] = os.path.join(tempfile.mkdtemp(prefix="poolgrad-tinygrad-"), "cache.db")
os.environ.setdefault("PARALLEL", "0")

import importlib.metadata  # noqa: E402
import subprocess  # noqa: E402

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from tinygrad import Device, Tensor, TinyJit, dtypes  # noqa: E402

from poolgrad.adapters.base import ERROR, NO_DEVICE, OK, UNSUPPORTED, Keywords, Outcome, Unsupported  # noqa: E402

from . import ENV_SWITCHES, METHODS, VARIANTS, plan  # noqa: E402

_DEVICES = {"cpu": "CPU", "gpu": "CUDA"}
VERSION = importlib.metadata.version("tinygrad")  # the package has no __version__


def to_tinygrad(a: np.ndarray, device: str) -> Tensor:
    if a.dtype == ml_dtypes.bfloat16:
        return Tensor(a.astype(np.float32), device=device).cast(dtypes.bfloat16)
    return Tensor(np.ascontiguousarray(a), device=device)


def inputs(x: np.ndarray, grad_output: np.ndarray, device: str) -> tuple[Tensor, Tensor]:
    """Fresh tensors for one call (backward adds to a tensor's .grad where one is left, as a
    training step without zero_grad would)."""
    xt = to_tinygrad(x, device)
    if hasattr(xt, "requires_grad_"):  # before 0.13, backward fills .grad only where asked
        xt.requires_grad_()
    return xt, to_tinygrad(grad_output, device)


def to_numpy(t: Tensor, dtype: np.dtype) -> np.ndarray:
    # tinygrad's own numpy() of a bfloat16 tensor is float32 (exact); back to the case dtype
    return t.numpy().astype(dtype) if dtype == ml_dtypes.bfloat16 else t.numpy()


def _pool_and_gradient(method: str, kw: Keywords, spelling: str):
    """The pooling and its gradient, as users spell it: ``y.backward(g)`` then ``x.grad`` (what a
    training step reads), or ``y.gradient(x, gradient=g)`` (the ``gradient`` variant)."""
    def run(x: Tensor, g: Tensor):
        y = getattr(x, method)(**kw)
        if spelling == "gradient":
            (dx,) = y.gradient(x, gradient=g)
        else:
            y.backward(g)
            dx = x.grad
        return y.realize(), dx.realize()
    return run


def _cc_version() -> str:
    try:
        return subprocess.run([os.environ.get("CC", "clang"), "--version"], capture_output=True, text=True,
                              timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError) as e:
        return f"unavailable ({e})"


class TinygradAdapter:
    framework = "tinygrad"
    variants = VARIANTS

    def __init__(self):
        self._jitted: dict[tuple, TinyJit] = {}
        # (spec, shape, dtype, device) -> the compiler's refusal: the same call renders the same
        # kernels in every variant (one gradient graph either spelling; TinyJit's first call is
        # an eager one), so it fails again without the seconds of lowering (poolgrad reruns each
        # case of a failed call alone, each in a call of the same shape)
        self._refused: dict[tuple, str] = {}

    def version(self) -> str:
        return VERSION

    def devices(self) -> list[str]:
        found = []
        for name, dev in _DEVICES.items():
            try:
                Device[dev]
            except Exception:  # tinygrad raises whatever opening an absent device raises
                continue
            found.append(name)
        return found

    def environment(self) -> dict:
        return {"tinygrad": VERSION, "default_device": Device.DEFAULT, "cc": _cc_version(),
                "renderer": type(Device[Device.DEFAULT].renderer).__name__,
                **{k: os.environ[k] for k in ENV_SWITCHES if k in os.environ}}

    def run(self, spec, variant, device, x, grad_output) -> Outcome:
        kw = plan(spec, variant, x.shape)  # raises for an unknown variant
        if device not in self.devices():
            return Outcome(NO_DEVICE, message=f"no {_DEVICES[device]} device available to tinygrad")
        if isinstance(kw, Unsupported):
            return Outcome(UNSUPPORTED, message=kw.reason)
        dev = _DEVICES[device]
        fn = _pool_and_gradient(METHODS[spec.op], kw, variant)
        info = {"device": dev}
        kernels = (spec, x.shape, x.dtype.str, dev)
        call = (variant, *kernels)
        if kernels in self._refused:
            return Outcome(ERROR, message=self._refused[kernels], info=info)
        try:
            if variant == "jit":
                if call not in self._jitted:  # a first call runs unjitted, the second captures
                    self._jitted[call] = TinyJit(fn)
                    self._jitted[call](*inputs(x, grad_output, dev))
                y, dx = self._jitted[call](*inputs(x, grad_output, dev))
                info["compiles"] = len(self._jitted)
            else:
                y, dx = fn(*inputs(x, grad_output, dev))
            forward, grad_input = to_numpy(y, x.dtype), to_numpy(dx, x.dtype)
        except AssertionError as e:  # tinygrad checks a call's shapes with asserts (Tensor._pool)
            return Outcome(UNSUPPORTED, message=f"AssertionError: {e}", info=info)
        except subprocess.CalledProcessError as e:  # the C compiler refused a kernel
            self._refused[kernels] = f"{type(e).__name__}: {e}"
            return Outcome(ERROR, message=self._refused[kernels], info=info)
        except Exception as e:  # whatever tinygrad raised is the result
            return Outcome(ERROR, message=f"{type(e).__name__}: {e}", info=info)
        return Outcome(OK, forward=forward, grad_input=grad_input, info=info)


ADAPTER = TinygradAdapter()
