"""Users' own pooling kernels as targets: ``--target module:function``.

The interface (stable; README, "Your own kernel")::

    function(spec: dict, x: numpy.ndarray, grad_output: numpy.ndarray) -> (forward, grad_input)

``spec`` holds the spec keys of the case format (poolgrad/cases/FORMAT.md) as ``PoolSpec.to_dict``
writes them; ``x`` is channels-first (N, C, *spatial) in the case dtype (ml_dtypes.bfloat16 for
bfloat16), ``grad_output`` has the forward output's shape; the function returns the forward
output and d/dx sum(forward * grad_output), both channels-first and stacked along N like x.
A kernel that runs elsewhere (a GPU, another framework) converts inside. Raising
NotImplementedError makes the spec ``unsupported`` for that kernel, with its message.

The kernel's target is ``user-<module>.<function>-cpu`` (framework "user", the variant names the
function; "cpu": the arrays it gets are host arrays). All user kernels share one worker
process, so a crash or hang in one is that case's result and the worker is restarted. This
module imports no framework: the pytest process uses it to parse --target.
"""

from __future__ import annotations

import importlib
import re

import numpy as np

from .base import ERROR, OK, UNSUPPORTED, Outcome

FRAMEWORK = "user"
_NAME = r"[A-Za-z_]\w*"


def variant_of(target: str) -> str:
    """``module:function`` -> the variant ``module.function`` (the function is the part after
    the last dot of a variant, so a variant maps back to exactly one kernel)."""
    if not re.fullmatch(rf"{_NAME}(\.{_NAME})*:{_NAME}", target):
        raise ValueError(f"--target {target!r}: expected module:function, e.g. my_pooling:argmax_first "
                         f"(an importable module and a function defined in it)")
    return target.replace(":", ".")


def kernel(variant: str):
    module, function = variant.rsplit(".", 1)
    fn = getattr(importlib.import_module(module), function, None)
    if not callable(fn):
        raise AttributeError(f"module {module!r} has no function {function!r}")
    return fn


class UserKernels:
    framework = FRAMEWORK
    variants = ()   # any module.function: the variants are what --target names

    def version(self) -> str:
        return "unversioned"

    def devices(self) -> list[str]:
        return ["cpu"]

    def environment(self) -> dict:
        return {"numpy": np.__version__}

    def run(self, spec, variant, device, x, grad_output) -> Outcome:
        fn = kernel(variant)   # an import error is an error of every case of this kernel
        try:
            result = fn(spec.to_dict(), x, grad_output)
        except NotImplementedError as e:
            return Outcome(UNSUPPORTED, message=f"{variant}: {e}" if str(e) else f"{variant} raised NotImplementedError")
        arrays = tuple(result) if isinstance(result, (tuple, list)) else ()
        if len(arrays) != 2:
            return Outcome(ERROR, message=f"{variant} returned {type(result).__name__}; expected a pair "
                                          f"(forward, grad_input) of NumPy arrays")
        forward, grad_input = map(np.asarray, arrays)   # as returned: no cast, no copy where possible
        for name, a in (("forward", forward), ("grad_input", grad_input)):
            if a.ndim != x.ndim or len(a) != len(x):
                return Outcome(ERROR, message=f"{variant} returned {name} of shape {a.shape}; expected "
                                              f"(N, C, *spatial) with N = {len(x)} like x {x.shape}")
        return Outcome(OK, forward=forward, grad_input=grad_input)


ADAPTER = UserKernels()
