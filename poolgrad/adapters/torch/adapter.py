"""PyTorch adapter: runs the call ``plan`` (poolgrad/adapters/torch/__init__.py) makes of a spec, as the
user would call it, in a worker process.

A spec whose arguments torch refuses (pad larger than half the kernel, ...) is UNSUPPORTED with
torch's own message (:func:`_refusal`). A spec the reference itself rejects raises its
SpecError: that is a bad case, not framework behaviour. Anything else torch raises is ERROR.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import ml_dtypes
import numpy as np
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters as dynamo_counters

from ..base import ERROR, NO_DEVICE, OK, UNSUPPORTED, Keywords, ModeMethods, Outcome, Unsupported
from .. import idioms, segments
from . import COMPILED, IDIOMS, MODULE_NAMES, SEGMENT_VARIANTS, VARIANTS, plan

_CHANNELS_LAST = {2: torch.channels_last, 3: torch.channels_last_3d}

# The GPU path must not take precision shortcuts the reference does not model.
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def _functional(op: str, rank: int, kw: Keywords):
    fn = getattr(F, f"{op}{rank}d")
    if "_random_samples" in kw:
        return _fractional(fn, kw)

    def call(t):
        return fn(t, **kw)
    return call


def _fractional(fn, kw: Keywords):
    """F.fractional_max_pool<r>d with the plan's samples as torch takes them: a contiguous
    (N, C, rank) tensor of the input's dtype, the same samples for every plane."""
    samples, rest = kw["_random_samples"], {k: v for k, v in kw.items() if k != "_random_samples"}

    def call(t):
        u = torch.tensor(samples, dtype=t.dtype, device=t.device).expand(*t.shape[:2], len(samples))
        return fn(t, _random_samples=u.contiguous(), **rest)
    return call


def _module(op: str, rank: int, kw: Keywords):
    return getattr(torch.nn, f"{MODULE_NAMES[op]}{rank}d")(**kw)


def _idiom(op: str, rank: int, kw: Keywords, variant: str):
    """The pooling an idiom variant writes without a pooling function (see plan's _idiom)."""
    if variant == "max_dim":
        def values_and_indices(t):
            y, indices = t.flatten(2).max(**kw)   # (N, C, 1): the plane's max and its flat position
            return y.reshape(*t.shape[:2], *(1,) * rank), indices.reshape(*t.shape[:2], *(1,) * rank)
        return values_and_indices
    reduce = torch.amax if op in idioms.MAX_OPS else torch.mean
    if variant == "reshape":
        return lambda t: reduce(t.reshape(kw["shape"]), dim=kw["dim"])
    if variant == "unfold":
        return lambda t: reduce(F.unfold(t, **kw["unfold"]).reshape(kw["shape"]), dim=kw["dim"])
    return lambda t: reduce(t, **kw)


def _scatter_reduce(call: segments.Segments):
    """A zero output of num_segments rows, scatter_reduce'd with include_self=False over the
    (items, features) data; reduce "amax" or "mean" (PyTorch Geometric's max is this call)."""
    reduce = {"max": "amax", "mean": "mean"}[call.reduce]

    def pool(t):
        ids = torch.tensor(call.segment_ids, device=t.device).view(-1, 1).expand_as(t)
        return t.new_zeros((call.num_segments, t.shape[1])).scatter_reduce(0, ids, t, reduce=reduce,
                                                                           include_self=False)
    return pool


def _global_pool(call: segments.Segments):
    """PyTorch Geometric's global_max_pool / global_mean_pool(x, batch, size) over the (items,
    features) data."""
    import torch_geometric.nn  # in the pyg variant's worker only (torch/__init__.py, PYG_WORKER)
    pool = getattr(torch_geometric.nn, call.api)
    return lambda t: pool(t, torch.tensor(call.segment_ids, device=t.device), size=call.num_segments)


def _pool(op: str, rank: int, kw, variant: str):
    """The eager call of a variant: the nn.Module, an idiom, a segment reduction, or the
    functional call."""
    if variant in SEGMENT_VARIANTS:
        return _global_pool(kw) if variant == "pyg" else _scatter_reduce(kw)
    if variant == "module":
        return _module(op, rank, kw)
    return _idiom(op, rank, kw, variant) if variant in IDIOMS else _functional(op, rank, kw)


def _fresh_code(fn):
    """A copy of ``fn`` with its own code object. Dynamo caches compiled frames per code
    object and, past its recompile limit, silently runs eager; every compiled closure would
    share one code object, so each cache entry gets its own."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def _hashable(kw: Keywords | segments.Segments) -> tuple | segments.Segments:
    return kw if isinstance(kw, segments.Segments) else tuple(sorted(kw.items()))


def to_torch(a: np.ndarray, device: str) -> torch.Tensor:
    """NumPy (incl. ml_dtypes.bfloat16, which torch.from_numpy does not know) -> tensor."""
    a = np.ascontiguousarray(a)
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).to(device)
    return torch.from_numpy(a).to(device)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Tensor -> channels-first NumPy of the same dtype, values untouched."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return np.ascontiguousarray(t.view(torch.int16).numpy()).view(ml_dtypes.bfloat16)
    return np.ascontiguousarray(t.numpy())


def _refusal(op: str, rank: int, kw: Keywords, variant: str, x: np.ndarray) -> Exception | None:
    """What torch raised refusing the call's arguments, or None: it accepts them (and whatever
    failed, failed on a call torch accepts: an error).

    torch checks a pooling call's arguments and shapes before any kernel runs
    (torch/nn/functional.py, aten's pool2d_shape_check / avg_pool*'s checks: "pad should be at
    most half of effective kernel size", "Output size is too small", ...), and those same
    checks run for a tensor on the meta device, which has a shape, dtype and memory format but
    no data and no kernels. A forward that also raises on a meta tensor was refused for its
    arguments; one that fails only on data, in a kernel (a dtype without a CPU kernel), in the
    backward or in inductor is an error. A compiled variant is asked through the eager call
    it compiles, with the same arguments."""
    meta = to_torch(x, "cpu").to("meta")
    if variant == "channels_last":
        meta = meta.contiguous(memory_format=_CHANNELS_LAST[rank])
    try:
        _pool(op, rank, kw, COMPILED.get(variant, variant))(meta)
    except Exception as refusal:  # torch refuses with RuntimeError, ValueError or TypeError
        return refusal
    return None


class TorchAdapter(ModeMethods):
    framework = "torch"
    variants = VARIANTS

    def __init__(self):
        self._compiled: dict[tuple, Any] = {}

    def version(self) -> str:
        return torch.__version__

    def devices(self) -> list[str]:
        return ["cpu", "gpu"] if torch.cuda.is_available() else ["cpu"]

    def environment(self) -> dict[str, Any]:
        gpu = torch.cuda.is_available()
        return {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if gpu else None,
            "gpu_name": torch.cuda.get_device_name(0) if gpu else None,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "num_threads": torch.get_num_threads(),
            "mkldnn": torch.backends.mkldnn.is_available(),
            "allow_tf32": torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32,
        }

    def _mode(self, method, spec, variant, device, x, grad_output, *extra) -> Outcome:
        mode = _MODES[method]
        if variant not in VARIANTS:
            raise ValueError(f"unknown torch variant {variant!r}; known: {', '.join(VARIANTS)}")
        if device == "gpu" and not torch.cuda.is_available():
            return Outcome(NO_DEVICE, message="no CUDA device present")
        rank = x.ndim - 2
        kw = plan(spec, variant, x.shape)
        if isinstance(kw, Unsupported):
            return Outcome(UNSUPPORTED, message=kw.reason)
        dev = "cuda" if device == "gpu" else "cpu"
        try:
            return self._execute(self._callable(spec.op, rank, kw, variant, x, dev, mode), variant, rank,
                                 dev, x, grad_output, *extra)
        except Exception as e:  # whatever torch raised is the result
            refusal = _refusal(spec.op, rank, kw, variant, segments.items(x) if spec.is_segment else x)
            if refusal is not None:  # for compile: torch's own check, without dynamo's wrapping
                return Outcome(UNSUPPORTED, message=f"{type(refusal).__name__}: {refusal}")
            return Outcome(ERROR, message=f"{type(e).__name__}: {e}")

    def run_bundle(self, specs, variant, device, xs, grad_outputs) -> list[Outcome]:
        """``run`` of each member (base.BUNDLE), a compiled variant's members in one compiled
        function: each member's pooling on its own input, one backward over all their outputs, as
        a model with several pooling layers compiles (segment members on their (items, features)
        data, adapters/segments.py). A member that has no call (Unsupported,
        refused by torch's argument checks) gets its own outcome without joining; where the
        compiled function fails, every member that joined it gets the ERROR, and the pool runs
        each of them alone (pool.py, run_bundle)."""
        if variant not in COMPILED:
            raise ValueError(f"torch bundles the compiled variants ({', '.join(COMPILED)}) only, not {variant!r}")
        outcomes: list[Outcome | None] = [None] * len(specs)
        joined = []
        for i, (spec, x) in enumerate(zip(specs, xs)):
            outcome = self._bundle_member(spec, variant, device, x)
            if isinstance(outcome, Outcome):
                outcomes[i] = outcome
            else:
                joined.append((i, spec.op, x.ndim - 2, outcome))
        if not joined:
            return outcomes
        dev = "cuda" if device == "gpu" else "cpu"
        key = ("bundle", dev, *((op, rank, _hashable(kw), xs[i].shape, xs[i].dtype.str) for i, op, rank, kw in joined))
        data = [segments.items(a) if spec.is_segment else a for spec, a in zip(specs, xs)]
        try:
            if key not in self._compiled:
                torch._dynamo.config.fail_on_recompile_limit_hit = True  # never a silent eager fallback
                pools = [_pool(op, rank, kw, COMPILED[variant]) for _, op, rank, kw in joined]

                def many(*tensors):
                    return [pool(t) for pool, t in zip(pools, tensors)]
                self._compiled[key] = torch.compile(_fresh_code(many), dynamic=False)
            inputs = [to_torch(data[i], dev).requires_grad_(True) for i, *_ in joined]
            ys = self._compiled[key](*inputs)
            torch.autograd.backward(ys, [to_torch(segments.items(grad_outputs[i]) if specs[i].is_segment
                                                  else grad_outputs[i], dev) for i, *_ in joined])
        except Exception as e:  # the whole compiled function's: the pool reruns each member alone
            for i, *_ in joined:
                outcomes[i] = Outcome(ERROR, message=f"{type(e).__name__}: {e}")
            return outcomes
        info = {"device_name": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
                "compiles": dynamo_counters["stats"]["unique_graphs"]}
        for (i, *_), y, t in zip(joined, ys, inputs):
            outcome = Outcome(OK, info=dict(info), forward=to_numpy(y), grad_input=to_numpy(t.grad))
            outcomes[i] = segments.as_planes(outcome, *xs[i].shape[:2]) if specs[i].is_segment else outcome
        return outcomes

    def _bundle_member(self, spec, variant, device, x) -> Outcome | dict | segments.Segments:
        """The compiled variant's plan of a bundle's member, or its own outcome where it has no
        call (as ``run`` answers it)."""
        if device == "gpu" and not torch.cuda.is_available():
            return Outcome(NO_DEVICE, message="no CUDA device present")
        kw = plan(spec, variant, x.shape)
        if isinstance(kw, Unsupported):
            return Outcome(UNSUPPORTED, message=kw.reason)
        refusal = _refusal(spec.op, x.ndim - 2, kw, variant, segments.items(x) if spec.is_segment else x)
        if refusal is not None:
            return Outcome(UNSUPPORTED, message=f"{type(refusal).__name__}: {refusal}")
        return kw

    def _callable(self, op, rank, kw, variant, x, dev, mode):
        """tensors -> the mode's arrays. For the compiled variants, torch.compile compiles the
        eager variant's call, or for jvp the whole mode (torch.func transforms trace into one
        graph); reverse and double backward differentiate the compiled call, as a user's training
        step would."""
        with_indices = variant in ("return_indices", "max_dim")
        if variant not in COMPILED:
            return functools.partial(mode, _pool(op, rank, kw, variant), with_indices)
        # Keyed on everything that would make dynamo recompile, so each entry compiles once.
        key = (op, rank, _hashable(kw), x.shape, x.dtype.str, dev, mode is _jvp)
        if key not in self._compiled:
            torch._dynamo.config.fail_on_recompile_limit_hit = True  # never a silent eager fallback
            pool = _pool(op, rank, kw, COMPILED[variant])
            if mode is _jvp:
                def whole(*tensors):
                    return mode(pool, with_indices, *tensors)
                self._compiled[key] = torch.compile(_fresh_code(whole), dynamic=False)
            else:
                self._compiled[key] = torch.compile(_fresh_code(pool), dynamic=False)
        if mode is _jvp:
            return self._compiled[key]
        return functools.partial(mode, self._compiled[key], with_indices)

    def _execute(self, computation, variant, rank, dev, x, grad_output, *extra) -> Outcome:
        if variant in SEGMENT_VARIANTS:  # (items, features) data in and out (adapters/segments.py)
            planned = "compile" if variant in COMPILED else "eager"
            return segments.as_planes(self._execute(computation, planned, rank, dev, *map(
                segments.items, (x, grad_output, *extra))), *x.shape[:2])
        tensors = [to_torch(a, dev) for a in (x, grad_output, *extra)]
        if variant == "channels_last":
            tensors = [t.contiguous(memory_format=_CHANNELS_LAST[rank]) for t in tensors]
        arrays = computation(*tensors)
        info: dict[str, Any] = {"device_name": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"}
        if variant == "compile":
            info["compiles"] = dynamo_counters["stats"]["unique_graphs"]
        if variant == "channels_last" and "forward" in arrays:
            info["output_channels_last"] = arrays["forward"].is_contiguous(memory_format=_CHANNELS_LAST[rank])
        return Outcome(OK, info=info, **{k: to_numpy(t) for k, t in arrays.items() if t is not None})


def _first(fn, with_indices: bool):
    return (lambda t: fn(t)[0]) if with_indices else fn


def _reverse(fn, with_indices, xt, gt) -> dict:
    xt.requires_grad_(True)
    result = fn(xt)
    y, indices = result if with_indices else (result, None)
    y.backward(gt)
    return {"forward": y, "grad_input": xt.grad, "indices": indices}


def _jvp(fn, with_indices, xt, gt, tangent) -> dict:
    """torch.func.jvp for the tangent, torch.func.vjp for the gradient (compiled together in
    the compile variant)."""
    pool = _first(fn, with_indices)
    y, y_t = torch.func.jvp(pool, (xt,), (tangent,))
    _, vjp = torch.func.vjp(pool, xt)
    return {"forward": y, "tangent_output": y_t, "grad_input": vjp(gt)[0]}


def _double_backward(fn, with_indices, xt, gt, v) -> dict:
    """autograd.grad with create_graph=True, then autograd.grad of sum(dX * v)."""
    xt.requires_grad_(True)
    gt.requires_grad_(True)
    (dx,) = torch.autograd.grad(_first(fn, with_indices)(xt), xt, gt, create_graph=True)
    # materialize_grads: torch's own zeros where sum(dx * v) does not depend on an input
    by_g, by_x = torch.autograd.grad(dx, (gt, xt), v, allow_unused=True, materialize_grads=True)
    return {"grad_input": dx, "grad_grad_output": by_g, "grad_grad_input": by_x}


_MODES = {"run": _reverse, "jvp": _jvp, "double_backward": _double_backward}


ADAPTER = TorchAdapter()
