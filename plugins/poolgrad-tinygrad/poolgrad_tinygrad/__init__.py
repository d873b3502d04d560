"""tinygrad: how a spec becomes the arguments of Tensor.max_pool2d / avg_pool2d (pure: importing
this does not import tinygrad, so collection and the reproducer use it too; adapter.py runs the
call in a worker).

Despite their names, tinygrad's max_pool2d and avg_pool2d pool any number of trailing spatial
dims (tinygrad/mixin/op.py), with ``kernel_size``, ``stride``, ``dilation``, ``padding`` (an int, one
per dim, or a (before, after) pair per dim, last dim first), ``ceil_mode`` and, for the average,
``count_include_pad``; both are compositions of pad, Tensor._pool (windows by movement ops) and a
max or sum reduction, whose gradients are tinygrad's autograd rules. What they cannot express is
Unsupported, never emulated: divisor_override, Lp and adaptive pooling.

Variants:
  eager     the call, its gradient by tinygrad's autograd as a training step reads it
            (y.backward(grad_output), then x.grad), realized at once
  jit       the same function under TinyJit, called twice: the second call captures the kernels
            and runs the captured graph, which is what a jitted training step runs
  gradient  the eager call with its gradient asked of Tensor.gradient (y.gradient(x,
            gradient=grad_output)), the other spelling tinygrad offers
"""

from __future__ import annotations

from poolgrad.adapters.base import Keywords, Unsupported
from poolgrad.adapters.framework import Framework, Upstream, WorkerEnvironment
from poolgrad.reference.geometry import resolve

VARIANTS = ("eager", "jit", "gradient")
METHODS = {"max_pool": "max_pool2d", "avg_pool": "avg_pool2d"}

# What the suite records and schedules by (poolgrad/adapters/registry.py, Framework).
AD_MODES: dict = {}  # tinygrad has no forward mode; the adapter runs no double backward (not measured)
# seconds per group, the median of the catalogue's 130 groups with -n 2 on 2 busy cores: tinygrad
# lowers each new kernel in Python (a warm CACHEDB saves only clang's part); jit and gradient (the
# very same kernels) measured after the same group's eager call had left them in the worker's memory
COSTS = {"eager": 3.2, "jit": 0.4, "gradient": 0.17}
# the renderer/compiler (DEV=CPU:LLVM, CC), its optimizer (NOOPT), emulated dtypes and the kernel cache
ENV_SWITCHES = ("DEV", "CC", "NOOPT", "EMULATED_DTYPES", "CACHELEVEL")


def plan(spec, variant: str, shape) -> Keywords | Unsupported:
    """The call's keyword arguments for an input of ``shape`` (N, C, *spatial), or why tinygrad
    has none."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown tinygrad variant {variant!r}; known: {', '.join(VARIANTS)}")
    if spec.op not in METHODS:
        return Unsupported(f"tinygrad has no {spec.op} (only Tensor.max_pool2d and avg_pool2d, in any rank)")
    if spec.divisor_override is not None:
        return Unsupported("divisor_override: tinygrad's avg_pool2d divides by the window's count")
    geom = resolve(spec, shape)
    # tinygrad's flat padding lists (before, after) per dim from the last dim to the first
    padding = tuple(p for before, after in reversed(geom.pads) for p in (before, after))
    kw = {"kernel_size": geom.kernel_size, "stride": geom.stride, "dilation": geom.dilation,
          "padding": padding, "ceil_mode": spec.ceil_mode}
    if spec.op == "avg_pool":
        kw["count_include_pad"] = spec.count_include_pad
    return Keywords(kw)


# The record the entry point names (poolgrad/adapters/framework.py).
FRAMEWORK = Framework("tinygrad", "poolgrad_tinygrad.adapter", "tinygrad", ("tinygrad",), VARIANTS,
                      planner=__name__, ad_modes=AD_MODES, costs=COSTS, env_switches=ENV_SWITCHES,
                      upstream=Upstream("tinygrad/tinygrad"),  # it has no issue forms
                      # its compiled kernels' SQLite cache, under --compile-cache's directory
                      worker_environment=WorkerEnvironment(
                          compile_cache=lambda root: {"CACHEDB": str(root / "tinygrad" / "cache.db")}))
