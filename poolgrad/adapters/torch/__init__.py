"""PyTorch: how a spec becomes torch's pooling arguments (pure: importing this does not import
torch, so collection and the reproducer use it too; adapter.py runs the call in a worker).

Variants:
  eager           torch.nn.functional.<op><r>d
  channels_last   the same call on channels_last / channels_last_3d tensors (2-D and 3-D only)
  compile         torch.compile(<the eager call>, dynamic=False), inductor backend
  module          the torch.nn module (nn.MaxPool2d, nn.LPPool3d, ...)
  return_indices  max_pool / adaptive_max_pool / fractional_max_pool with return_indices=True;
                  ``Outcome.indices`` is torch's int64 index: the flat position in each (n, c)
                  plane's spatial dims

Segment pooling (segment_max_pool, segment_avg_pool) runs in variants of its own, over the
(items, features) data (adapters/segments.py):
  scatter_reduce  torch.zeros(num_segments, F).scatter_reduce(0, ids, x, reduce="amax" | "mean",
                  include_self=False)
  scatter_reduce_compile  torch.compile(<that call>, dynamic=False): what a GNN user compiling a
                  model gets (PyG's global max pool is the same call); inductor runs the forward as
                  aten's kernel (a fallback for amax / mean) and lowers the traced backward formula
  pyg             PyTorch Geometric's torch_geometric.nn.global_max_pool / global_mean_pool(x,
                  batch=ids, size=num_segments), what its aggr="max" / "mean" layers call too
                  (torch_geometric/utils/_scatter.py: scatter): max is the scatter_reduce above
                  (where torch_scatter is not installed or on the CPU), mean is scatter_add_ divided
                  by each segment's count clamped to 1. A worker of its own, which needs
                  torch_geometric (without it the variant is not installed).

fractional_max_pool runs in eager and return_indices only: F.fractional_max_pool<r>d (2-D, 3-D)
with ``_random_samples`` that make torch's interval formula give the case's regions
(:func:`fractional_samples`).

Pooling as users write it without a pooling function (poolgrad/adapters/idioms.py says which
specs each can express):
  amax            x.amax(dim=(2, ...), keepdim=True): global max (adaptive_max_pool, output 1)
  max_dim         x.flatten(2).max(dim=2, keepdim=True): global max, values and indices (the
                  flat position in the plane, judged like return_indices)
  mean            x.mean(dim=(2, ...), keepdim=True): global average (adaptive_avg_pool, output 1)
  reshape         x.reshape(N, C, H/k, k, ...).amax / .mean over the block dims: windows that
                  tile the input
  unfold          F.unfold(x, ...) (2-D only) then amax / mean over each window's taps

A spec torch has no argument for (asymmetric or SAME-asymmetric pads, dilation outside
max_pool, ...) is Unsupported with the reason, never emulated.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from poolgrad.reference.geometry import resolve

from .. import idioms, keras, onednn, segments
from . import torchvision
from ..base import Keywords, Unsupported
from ..framework import Framework, Unstacked, Upstream, WorkerEnvironment, WorkerSpec

VARIANTS = ("eager", "channels_last", "compile", "module", "return_indices", "amax", "max_dim", "mean", "reshape",
            "unfold", "scatter_reduce", "scatter_reduce_compile", "pyg")
SEGMENT_VARIANTS = ("scatter_reduce", "scatter_reduce_compile", "pyg")
SEGMENT_APIS = {"scatter_reduce": "scatter_reduce", "scatter_reduce_compile": "scatter_reduce",
                "pyg": "global_{reduce}_pool"}
# The variants torch.compile runs, and the variant whose eager call each compiles.
COMPILED = {"compile": "eager", "scatter_reduce_compile": "scatter_reduce"}
# The idioms' reductions, by variant: which ops they compute (a global variant only one).
GLOBAL_OPS = {"amax": ("adaptive_max_pool",), "max_dim": ("adaptive_max_pool",), "mean": ("adaptive_avg_pool",)}
API_PATHS = {"torch": ("eager", False)}  # F.*_pool: explicit pads only

# What the suite records and schedules by (poolgrad/adapters/registry.py, Framework).
AD_MODES = {"jvp": ("eager", "compile", "amax", "max_dim"), "double_backward": ("eager", "amax", "max_dim")}
# inductor: two C++ kernels (forward, backward) per group, in a bundle of BUNDLES["compile"] groups;
# a segment group's backward is several kernels (gather, eq, scatter_add, div, mul)
COSTS = {"compile": 1.1, "scatter_reduce_compile": 3.2, "keras": 0.05, "keras_global": 0.05, "keras_global_cf": 0.05}
# torch.compile's reverse mode compiles several groups' calls as one function (adapter.py, run_bundle):
# inductor's cost per compiled graph is paid once for them.
BUNDLES = {"compile": 8, "scatter_reduce_compile": 8}
ENV_SWITCHES = ("TORCHINDUCTOR_FREEZING", "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE", *onednn.ISA_CAP_SWITCHES)
# Its CPU kernels may go through oneDNN; the adapter reports whether torch has it as "mkldnn".
DISPATCH = onednn.OneDNN("mkldnn")
# In a worker sharing its GPU (pool.py): torch.cuda.is_available() in a zygote's import (Keras's
# torch backend calls it) would initialise CUDA, which the workers forked from it then cannot
# use; inductor keeps its compile cache by default (in /tmp), under --compile-cache here.
WORKER_ENVIRONMENT = WorkerEnvironment(
    shared_gpu={"PYTORCH_NVML_BASED_CUDA_CHECK": "1"},
    compile_cache=lambda root: {"TORCHINDUCTOR_CACHE_DIR": str(root / "torchinductor")})
UPSTREAM = Upstream("pytorch/pytorch", "the 🐛 Bug Report form; torch.compile findings: the torch.compile form")
# The pyg variant runs in the torch adapter, in a worker that needs PyTorch Geometric.
PYG_WORKER = WorkerSpec("torch-pyg", __name__ + ".adapter", {}, "torch_geometric", __name__,
                        upstream=Upstream("pyg-team/pytorch_geometric", "the 🐛 Bug Report form"))
MODULE_NAMES = {"max_pool": "MaxPool", "avg_pool": "AvgPool", "lp_pool": "LPPool",
                "adaptive_max_pool": "AdaptiveMaxPool", "adaptive_avg_pool": "AdaptiveAvgPool"}
CHANNELS_LAST_RANKS = (2, 3)
IDIOMS = (*GLOBAL_OPS, "reshape", "unfold")


def _sliding_arguments(spec, geom, rank: int) -> dict | Unsupported:
    """Keyword arguments of the torch call for a sliding-window op, or why none exist."""
    pads = geom.pads
    if any(before != after for before, after in pads):
        origin = " (SAME resolves to them)" if spec.padding == "SAME" else ""
        return Unsupported(f"asymmetric padding {list(pads)}{origin}: torch pools take one symmetric pad per dim")
    padding = tuple(before for before, _ in pads)
    if spec.op != "max_pool" and any(d != 1 for d in geom.dilation):
        return Unsupported(f"dilation {geom.dilation}: torch {spec.op} has no dilation")
    kw: dict[str, Any] = {"kernel_size": geom.kernel_size, "stride": geom.stride, "ceil_mode": spec.ceil_mode}
    if spec.op == "max_pool":
        kw.update(padding=padding, dilation=geom.dilation)
    elif spec.op == "avg_pool":
        kw.update(padding=padding, count_include_pad=spec.count_include_pad)
        if spec.divisor_override is not None:
            if rank == 1:
                return Unsupported("divisor_override: torch avg_pool1d has none")
            kw["divisor_override"] = spec.divisor_override
    else:
        if any(padding):
            return Unsupported(f"padding {padding}: torch lp_pool has no padding")
        kw["norm_type"] = spec.norm_type
    return kw


def _idiom(spec, variant: str, shape) -> Keywords | Unsupported:
    """The arguments of an idiom variant's calls: ``dim`` (and ``keepdim``) of the reduction;
    reshape's ``shape`` (blocks split out); unfold's ``unfold`` keyword arguments and the
    ``shape`` (N, C, taps, *out) its columns are viewed as."""
    if variant in GLOBAL_OPS:
        dims = idioms.global_axes(spec, shape, GLOBAL_OPS[variant])
        if isinstance(dims, Unsupported):
            return dims
        return Keywords({"dim": 2, "keepdim": True} if variant == "max_dim" else {"dim": dims, "keepdim": True})
    if variant == "reshape":
        view = idioms.block_view(spec, shape)
        return view if isinstance(view, Unsupported) else Keywords({"shape": view[0], "dim": view[1]})
    if len(shape) != 4:
        return Unsupported("F.unfold extracts 2-D patches only")
    window = idioms.patches(spec, shape)
    if isinstance(window, Unsupported):
        return window
    if any(before != after for before, after in window.pads):
        return Unsupported(f"asymmetric padding {list(window.pads)}: F.unfold takes one symmetric pad per dim")
    unfold = {"kernel_size": window.kernel, "dilation": window.dilation,
              "padding": tuple(before for before, _ in window.pads), "stride": window.stride}
    return Keywords({"unfold": unfold, "shape": (*shape[:2], math.prod(window.kernel), *window.out_shape), "dim": 2})


# The dtypes torch's interval formula computes in: the input's own (generate_intervals<scalar_t>
# in aten/src/ATen/native/FractionalMaxPooling.h; c10::Half and BFloat16 round every operation
# to the type, as NumPy's float16 and ml_dtypes' bfloat16 do).
_SAMPLE_DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}


def torch_intervals(sample, length: int, out: int, kernel: int, dtype) -> list[int]:
    """torch's window starts along one dim (generate_intervals): start_i = int((i + u) * alpha)
    - int(u * alpha) with alpha = (length - kernel) / (out - 1), every operation in ``dtype``;
    the last start is always length - kernel."""
    t = _SAMPLE_DTYPES[dtype]
    u = t(sample)
    starts = []
    if out > 1:
        alpha = t(t(length - kernel) / t(out - 1))
        starts = [int(t(t(t(i) + u) * alpha)) - int(t(u * alpha)) for i in range(out - 1)]
    return starts + [length - kernel]


def _sample_for(starts: list[int], length: int, kernel: int, dtype) -> float | None:
    """A sample u in [0, 1), exact in ``dtype``, whose torch intervals are ``starts``, or None.
    The starts change only where some (i + u) * alpha crosses an integer, so trying u = 0,
    every such crossing (and the values of ``dtype`` beside it) and the midpoints between
    crossings tries every sequence the formula can give."""
    out = len(starts)
    t = _SAMPLE_DTYPES[dtype]
    if np.dtype(t).itemsize == 2:
        return _sample_among_all(starts, length, kernel, t)
    alpha = (length - kernel) / (out - 1) if out > 1 else 0.0
    cuts = sorted({m / alpha - i for i in range(out - 1) for m in range(int(i * alpha), int((i + 1) * alpha) + 2)
                   if 0 <= m / alpha - i < 1} | {0.0}) if alpha else [0.0]
    candidates = cuts + [(a + b) / 2 for a, b in zip(cuts, cuts[1:] + [1.0])]
    for c in candidates:
        for u in (t(c), np.nextafter(t(c), t(1)), np.nextafter(t(c), t(0))):
            if 0 <= float(u) < 1 and torch_intervals(u, length, out, kernel, dtype) == starts:
                return float(u)
    return None


def _sample_among_all(starts: list[int], length: int, kernel: int, t) -> float | None:
    """_sample_for in a 16-bit dtype: every one of its values in [0, 1) is tried (vectorized, each
    operation rounded to it as torch_intervals rounds it). Its rounding of i + u can move a start
    where exact arithmetic crosses no integer (bfloat16: 8 + 0.96875 is 9), so crossings miss some."""
    u = np.arange(1 << 16, dtype=np.uint16).view(t)
    with np.errstate(invalid="ignore"):
        value = u.astype(np.float64)
    u = u[(value >= 0) & (value < 1)]  # NaNs compare false
    out = len(starts)
    match = np.ones(len(u), bool)
    if out > 1:
        alpha = t(t(length - kernel) / t(out - 1))
        first = (u * alpha).astype(t).astype(np.int64)
        for i, start in enumerate(starts[:-1]):
            match &= (((t(i) + u).astype(t) * alpha).astype(t).astype(np.int64) - first) == start
    found = [float(v) for v in u[match][:1] if torch_intervals(v, length, out, kernel, np.dtype(t).name) == starts]
    return found[0] if found else None


def fractional_samples(spec, shape) -> tuple[tuple[int, ...], tuple[float, ...]] | Unsupported:
    """(kernel_size, one sample per spatial dim in spatial order) that make torch pool the spec's
    regions, or why torch cannot: its windows have one size per dim, start where its formula
    puts them (the first at 0, the last at length - kernel, the others spread by alpha)."""
    dtype = spec.dtype or "float32"
    kernel, samples = [], []
    for d, (regions, length) in enumerate(zip(spec.regions, shape[2:])):
        sizes = sorted({stop - start for start, stop in regions})
        if len(sizes) != 1:
            return Unsupported(f"regions of sizes {sizes} along dim {d}: torch fractional max pooling has one window "
                               "size (kernel_size) per dim")
        starts = [start for start, _ in regions]
        if len(starts) + sizes[0] - 1 > length:
            return Unsupported(f"{len(starts)} windows of size {sizes[0]} along dim {d} of length {length}: torch "
                               "refuses output + kernel - 1 > input")
        u = _sample_for(starts, length, sizes[0], dtype)
        if u is None:
            return Unsupported(f"starts {starts} along dim {d}: no _random_samples value makes torch's interval "
                               f"formula give them (for length {length}, kernel {sizes[0]}, {dtype})")
        kernel.append(sizes[0])
        samples.append(u)
    return tuple(kernel), tuple(samples)


def _fractional(spec, variant: str, shape) -> Keywords | Unsupported:
    if variant not in ("eager", "return_indices"):
        return Unsupported("poolgrad calls torch's fractional max pooling as F.fractional_max_pool2d/3d, "
                           "eagerly, with and without return_indices")
    if len(shape) not in (4, 5):
        return Unsupported("torch has fractional max pooling in 2-D and 3-D only")
    found = fractional_samples(spec, shape)
    if isinstance(found, Unsupported):
        return found
    kernel, samples = found
    # torch reads one sample per (n, c) plane and dim, W before H in 2-D (FractionalMaxPool2d.cpp)
    # and T, H, W in 3-D (FractionalMaxPool3d.cpp); every plane pools the same regions.
    order = samples[::-1] if len(shape) == 4 else samples
    kw = {"kernel_size": kernel, "output_size": tuple(len(r) for r in spec.regions), "_random_samples": order}
    if variant == "return_indices":
        kw["return_indices"] = True
    return Keywords(kw)


def plan(spec, variant: str, shape) -> Keywords | segments.Segments | Unsupported:
    """The keyword arguments of the call (shared by the functional and nn.Module forms) for an
    input of ``shape`` (N, C, *spatial), or why the spec is not expressible in this variant."""
    refused = segments.refuse(spec, variant, SEGMENT_VARIANTS)
    if refused is not None:
        return refused
    if spec.is_segment:
        return segments.call(spec, SEGMENT_APIS[variant])
    if spec.op == "fractional_max_pool":
        return _fractional(spec, variant, shape)
    if variant in IDIOMS:
        return _idiom(spec, variant, shape)
    rank = len(shape) - 2
    if variant == "channels_last" and rank not in CHANNELS_LAST_RANKS:
        return Unsupported("channels_last: torch has no channels-last memory format for 1-D inputs")
    if variant == "return_indices" and not spec.is_max:
        return Unsupported(f"return_indices: torch {spec.op} returns no indices")
    geom = resolve(spec, shape)
    kw = {"output_size": geom.out_shape} if spec.is_adaptive else _sliding_arguments(spec, geom, rank)
    if isinstance(kw, Unsupported):
        return kw
    if rank == 1:  # the 1-D calls take plain ints (lp_pool1d multiplies by kernel_size)
        kw = {k: v[0] if isinstance(v, tuple) else v for k, v in kw.items()}
    if variant == "return_indices":
        kw["return_indices"] = True
    return Keywords(kw)


# Cases whose gradient a path writes outside their own (n, c) planes, so that in a stack another case
# receives it; they run alone: a padding-only dilated window's index past its plane on the CPU kernels
# (torch-cpu-dilated-empty-window-index), torch.compile's 3-D index of a leading padding tap
# (torch-compile-neginf-padding-3d-stray-gradient).
UNSTACKED = (Unstacked(("eager", "module", "channels_last", "return_indices"), ("max_pool*",), ("empty_window", "dilation")),
             Unstacked(("compile",), ("max_pool3d",), ("neginf_window_after_padding",)))
# Calls that a case fails (torch-compile-neginf-padding-index-error: the backward's index check raises
# in 1-D and 2-D) run outside bundles, so the other groups' compiled function runs.
UNBUNDLED = tuple(Unstacked(("compile",), ("max_pool1d", "max_pool2d"), (p,))
                  for p in ("neginf_window_after_padding", "empty_window"))


# The record pyproject.toml registers (poolgrad/adapters/framework.py): this package plans, and
# adapter.py runs, every variant but Keras's, which runs on torch in a worker of its own.
FRAMEWORK = Framework("torch", "poolgrad.adapters.torch.adapter", "torch", ("torch",),
                      (*VARIANTS, *keras.VARIANTS, *torchvision.ROI_VARIANTS),
                      {"return_indices": "plane", "max_dim": "plane"},
                      {**keras.on("torch"), **dict.fromkeys(torchvision.ROI_VARIANTS, torchvision.WORKER), "pyg": PYG_WORKER},
                      __name__,
                      ad_modes=AD_MODES, costs=COSTS, env_switches=ENV_SWITCHES, dispatch=DISPATCH,
                      api_paths={**API_PATHS, **keras.API_PATHS}, worker_environment=WORKER_ENVIRONMENT,
                      upstream=UPSTREAM, unstacked=UNSTACKED, bundles=BUNDLES, unbundled=UNBUNDLED)
