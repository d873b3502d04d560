"""MindSpore: how a spec becomes a MindSpore pooling call (pure: importing this does not import
mindspore, so poolgrad's collection and reproducer use it too; adapter.py runs the call in a
worker).

Variants (the gradient is always ``mindspore.value_and_grad(pool, grad_position=0,
sens_param=True)(x, grad_output)``: the forward and the VJP with the given upstream gradient):
  pynative        mindspore.ops.<op><r>d in PyNative mode (MindSpore's default, eager)
  jit             the same forward-and-gradient step under mindspore.jit (graph mode: the function
                  parsed and compiled whole, as a training step is)
  return_indices  mindspore.ops max_pool2d/3d and adaptive_max_pool2d/3d with return_indices=True
                  (``Outcome.indices``: the flat position in each (n, c) plane)
  nn              the mindspore.nn cells (MaxPool1d..3d with pad_mode "pad", "same" or "valid",
                  AvgPool1d..3d, LPPool1d/2d, AdaptiveMaxPool1d..3d, AdaptiveAvgPool1d..3d), PyNative
  mint            mindspore.mint.nn.functional, MindSpore's PyTorch-like API, PyNative

What an API cannot say (mindspore.ops has no max_pool1d or lp_pool3d; asymmetric padding of max
pooling; dilation outside max pooling; padding of Lp pooling; divisor_override in 1-D;
fractional max pooling's regions, which come from the private ``_random_samples``) is Unsupported
with the reason, never emulated.
"""

from __future__ import annotations

from typing import Any

from poolgrad.adapters.base import Keywords, Unsupported
from poolgrad.adapters.framework import Framework, Unstacked
from poolgrad.reference.geometry import resolve

VARIANTS = ("pynative", "jit", "return_indices", "nn", "mint")
OPS_VARIANTS = ("pynative", "jit", "return_indices")

# the ranks each API has a function (a cell) of, by op
RANKS = {
    "ops": {"max_pool": (2, 3), "avg_pool": (1, 2, 3), "lp_pool": (1, 2), "adaptive_max_pool": (1, 2, 3),
            "adaptive_avg_pool": (1, 2, 3)},
    "nn": {"max_pool": (1, 2, 3), "avg_pool": (1, 2, 3), "lp_pool": (1, 2), "adaptive_max_pool": (1, 2, 3),
           "adaptive_avg_pool": (1, 2, 3)},
    "mint": {"max_pool": (2,), "avg_pool": (1, 2, 3), "adaptive_max_pool": (1, 2), "adaptive_avg_pool": (1, 2, 3)},
}
# the cells of mindspore.nn, by op
CELLS = {"max_pool": "MaxPool", "avg_pool": "AvgPool", "lp_pool": "LPPool", "adaptive_max_pool": "AdaptiveMaxPool",
         "adaptive_avg_pool": "AdaptiveAvgPool"}

AD_MODES: dict = {}  # forward mode and double backward not measured
# Seconds per batching group on 2 cores (catalogue run, mindspore 2.10.0): jit compiles a graph per group.
COSTS = {"jit": 0.3, "pynative": 0.01, "return_indices": 0.01, "nn": 0.01, "mint": 0.005}
# what MindSpore reads at start that changes which CPU kernels run or how many threads they use
ENV_SWITCHES = ("MS_DEV_JIT_SYNTAX_LEVEL", "MS_JIT", "OMP_NUM_THREADS")


def api(variant: str) -> str:
    """The API a variant calls: "ops", "nn" or "mint"."""
    return variant if variant in ("nn", "mint") else "ops"


def function_name(spec, variant: str, rank: int) -> str:
    """The function (mindspore.ops, mindspore.mint.nn.functional) or cell (mindspore.nn) called
    for an input of ``rank`` spatial dims."""
    return f"{CELLS[spec.op]}{rank}d" if api(variant) == "nn" else f"{spec.op}{rank}d"


def qualified_name(spec, variant: str, rank: int) -> str:
    module = {"ops": "mindspore.ops", "nn": "mindspore.nn", "mint": "mindspore.mint.nn.functional"}[api(variant)]
    return f"{module}.{function_name(spec, variant, rank)}"


def _one(values: tuple, rank: int):
    return values[0] if rank == 1 else tuple(values)


def _window(spec, geom, rank: int, variant: str) -> dict | Unsupported:
    """Arguments of a sliding-window function or cell."""
    where = api(variant)
    pads = geom.pads
    symmetric = all(before == after for before, after in pads)
    if spec.op != "max_pool" and any(d != 1 for d in geom.dilation):
        return Unsupported(f"dilation {geom.dilation}: MindSpore's {spec.op} has no dilation")
    kw: dict[str, Any] = {"kernel_size": _one(geom.kernel_size, rank), "stride": _one(geom.stride, rank)}
    if spec.op == "lp_pool":
        if any(p for pair in pads for p in pair):
            return Unsupported(f"padding {list(pads)}: MindSpore's lp_pool{rank}d has no padding")
        return {"norm_type": float(spec.norm_type), **kw, "ceil_mode": spec.ceil_mode}
    if where == "nn" and isinstance(spec.padding, str):
        # the cells' own spelling of SAME and VALID
        kw["pad_mode"] = spec.padding.lower()
    else:
        if spec.op == "max_pool" and not symmetric:
            return Unsupported(f"asymmetric padding {list(pads)}: MindSpore's max pooling takes one pad per dim")
        if where == "nn":
            kw["pad_mode"] = "pad"
        flat = tuple(p for pair in pads for p in pair)
        if spec.op == "avg_pool" and where == "ops":
            # mindspore.ops avg pooling takes one int or (before, after) for every dim, nothing per dim
            kw["padding"] = flat if len(set(flat)) > 1 else flat[0]
        elif spec.op == "avg_pool" and not symmetric:
            return Unsupported(f"asymmetric padding {list(pads)}: {where}'s avg pooling takes one pad per dim")
        else:
            kw["padding"] = _one(tuple(before for before, _ in pads), rank)
    if spec.op == "max_pool":
        kw["dilation"] = _one(geom.dilation, rank)
    kw["ceil_mode"] = spec.ceil_mode
    if spec.op == "avg_pool":
        kw["count_include_pad"] = spec.count_include_pad
        if spec.divisor_override is not None:
            if rank == 1:
                return Unsupported(f"divisor_override: MindSpore's avg_pool1d ({where}) has none")
            kw["divisor_override"] = spec.divisor_override
    return kw


def plan(spec, variant: str, shape) -> Keywords | Unsupported:
    """The keyword arguments of the call for an input of ``shape`` (N, C, *spatial), or why this
    variant has none."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown mindspore variant {variant!r}; known: {', '.join(VARIANTS)}")
    rank, where = len(shape) - 2, api(variant)
    if spec.op == "fractional_max_pool":
        return Unsupported("fractional max pooling: mindspore.ops.fractional_max_pool2d/3d draw their regions from "
                           "the private _random_samples argument; poolgrad does not map regions to it")
    if spec.op not in CELLS:
        return Unsupported(f"MindSpore has no {spec.op} pooling function")
    if rank not in RANKS[where].get(spec.op, ()):
        return Unsupported(f"{qualified_name(spec, variant, rank)}: MindSpore has no such "
                           f"{'cell' if where == 'nn' else 'function'}")
    if variant == "return_indices" and (not spec.is_max or rank == 1):
        return Unsupported(f"return_indices: mindspore.ops.{spec.op}{rank}d returns no indices")
    geom = resolve(spec, shape)
    if spec.is_adaptive:
        kw: dict | Unsupported = {"output_size": _one(geom.out_shape, rank)}
    else:
        kw = _window(spec, geom, rank, variant)
    if isinstance(kw, Unsupported):
        return kw
    if variant == "return_indices":
        kw["return_indices"] = True
    return Keywords(kw)


# MaxPool3DWithArgmax (ops.max_pool3d, the nn.MaxPool cells with explicit padding) gives a window with no
# real element an index past its plane, and its backward adds that window's gradient there: in a stack,
# another case's (findings: mindspore-max-pool3d-empty-window-index-outside). Such cases run alone.
UNSTACKED = (Unstacked(("pynative", "jit", "return_indices"), ("max_pool3d",), ("empty_window",)),
             Unstacked(("nn",), ("max_pool*",), ("empty_window",)))

# The record the entry point names (poolgrad/adapters/framework.py).
FRAMEWORK = Framework("mindspore", "poolgrad_mindspore.adapter", "mindspore", ("mindspore",),
                      VARIANTS, {"return_indices": "plane"}, planner=__name__, ad_modes=AD_MODES, costs=COSTS,
                      env_switches=ENV_SWITCHES, unstacked=UNSTACKED)
