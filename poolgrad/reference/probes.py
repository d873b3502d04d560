"""The routing probe: an upstream gradient whose sums are exact in the dtype and whose routing
dX reads back (the catalogue's default grad_output, and the AD modes' direction)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .dtypes import dtype_from_name

# Exponents of the probe stay below this even where the dtype allows more, so gradients stay
# modest numbers (float64 would otherwise reach 2**52).
_MAX_PROBE_EXPONENTS = 24


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
