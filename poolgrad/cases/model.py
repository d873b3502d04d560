"""The case: a pooling spec plus concrete arrays, and the routing probe used as its default
upstream gradient."""

from __future__ import annotations

import dataclasses
import functools
import json
import math

import ml_dtypes
import numpy as np

from poolgrad.reference import PoolSpec, resolve
from poolgrad.reference.dtypes import dtype_from_name

from .windows import without_dtype

# Exponents of the probe stay below this even where the dtype allows more, so gradients stay
# modest numbers (float64 would otherwise reach 2**52).
_MAX_PROBE_EXPONENTS = 24


@dataclasses.dataclass(frozen=True, eq=False)
class Case:
    """One conformance case. ``spec`` has ``dtype`` and ``rank`` set; ``input`` has shape
    ``(N, C, *spatial)`` and ``grad_output`` the forward output's shape, both in the spec's
    dtype and read-only (the catalogue is shared by every test of a run).

    Compared by identity (``eq=False``): arrays have no single truth value.
    """

    id: str
    family: str
    spec: PoolSpec
    input: np.ndarray
    grad_output: np.ndarray

    @property
    def group_key(self) -> tuple:
        """Cases with equal keys run as one framework call, stacked along N: the same spec
        (dtype included), channel count and spatial shape. Empty-batch cases keep a call of
        their own, so the framework meets the empty tensor itself."""
        return json.dumps(self.spec.to_dict(), sort_keys=True), self.input.shape[1:], self.input.shape[0] == 0


def make_case(id: str, family: str, spec: PoolSpec, input: np.ndarray, grad_output=None) -> Case:
    """A Case with arrays rounded to the spec's dtype, frozen read-only; ``grad_output``
    defaults to :func:`default_grad_output`."""
    dtype = dtype_from_name(spec.dtype)
    x = np.array(input, dtype=dtype)
    g = default_grad_output(spec, x.shape) if grad_output is None else np.array(grad_output, dtype=dtype)
    x.flags.writeable = False
    g.flags.writeable = False
    return Case(id, family, spec, x, g)


def significand_bits(dtype) -> int:
    """Bits of precision including the implicit one: bfloat16 8, float16 11, float32 24."""
    return int(ml_dtypes.finfo(dtype_from_name(dtype)).nmant) + 1


def routing_probe(shape, dtype, window_volume: int) -> np.ndarray:
    """An upstream gradient whose sums are exact and whose routing can be read back from dX.

    Rule: the element with C-order flat index ``j`` gets ``2 ** (j mod P)`` where
    ``P = min(bits + 1 - ceil(log2(window_volume)), bits, 24)`` and ``bits`` is the dtype's
    significand (bfloat16 8, float16 11, float32 24, float64 53).

    - Exact: an element of dX receives at most ``window_volume`` of these values, so the sum
      is an integer no larger than ``window_volume * 2 ** (P - 1) <= 2 ** bits`` (or, when
      the exponents are distinct, at most ``2 ** P - 1``), which the dtype represents exactly.
    - Decodable: any ``P`` consecutive outputs carry distinct powers of two, so where the
      windows that can reach one input element lie within ``P`` consecutive flat positions
      (neighbouring windows along the last axes), the binary digits of that element's dX
      say exactly which windows routed to it. Beyond that span exponents repeat: that is
      as far as the dtype's precision allows.
    """
    bits = significand_bits(dtype)
    volume = max(int(window_volume), 1)
    p = max(1, min(bits + 1 - math.ceil(math.log2(volume)), bits, _MAX_PROBE_EXPONENTS))
    j = np.arange(math.prod(shape), dtype=np.int64)
    return np.ldexp(1.0, j % p).reshape(shape).astype(dtype_from_name(dtype))


@functools.lru_cache(maxsize=512)
def _out_shape_and_fan_in(spec: PoolSpec, spatial_shape: tuple[int, ...]) -> tuple[tuple, int]:
    """The output's spatial shape and the most windows that read one input element
    (windows are separable, so the product of the per-axis counts; overlapping adaptive
    bins can exceed the bin volume)."""
    geom = resolve(spec, (1, 1, *spatial_shape))
    fan_in = 1
    for axis in geom.axes:
        fan_in *= int(np.bincount(axis.positions[axis.in_input], minlength=axis.length).max())
    return geom.out_shape, fan_in


def default_grad_output(spec: PoolSpec, input_shape) -> np.ndarray:
    """The routing probe over the forward output of ``spec`` on an input of ``input_shape``."""
    out_spatial, fan_in = _out_shape_and_fan_in(without_dtype(spec), tuple(input_shape[2:]))
    return routing_probe(tuple(input_shape[:2]) + out_spatial, spec.dtype, fan_in)
