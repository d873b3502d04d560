"""lp_pool, PyTorch's definition: y = (sign(a) * relu(|a|) * K) ** (1/p) where
a = avg_pool(x ** p) with count_include_pad and K the kernel volume. So y = (sum x**p)**(1/p)
for full windows, a ceil_mode window clipped at the edge is scaled by K / (taps inside), and
the relu makes the gradient of a window whose sum is 0 exactly 0 (not inf * 0). ``acc`` is the
dtype the power sums and the gradient's sums are kept in (accumulate.py)."""

from __future__ import annotations

import numpy as np

from .accumulate import F64
from .avg_pool import spread, window_sum
from .geometry import window_volume
from .spec import PoolSpec
from .taps import TapPlan


def _scale(plan: TapPlan) -> np.ndarray:
    return window_volume(plan.geom) / plan.geom.window_counts("in_padded")


def _scaled_sum(spec: PoolSpec, plan: TapPlan, xw: np.ndarray, acc=F64) -> np.ndarray:
    return window_sum(plan, xw, lambda v: v ** spec.norm_type, acc) * _scale(plan)


def forward(spec: PoolSpec, plan: TapPlan, xw: np.ndarray, acc=F64) -> np.ndarray:
    with np.errstate(all="ignore"):
        return _scaled_sum(spec, plan, xw, acc) ** (1.0 / spec.norm_type)


def backward(spec: PoolSpec, plan: TapPlan, xw: np.ndarray, g: np.ndarray, acc=F64) -> np.ndarray:
    p = spec.norm_type
    with np.errstate(all="ignore"):
        z = _scaled_sum(spec, plan, xw, acc)
        per_window = g * np.where(z != 0, z ** (1.0 / p - 1.0), 0.0) * _scale(plan)
        return spread(plan, xw.shape, per_window, lambda v: v ** (p - 1.0), xw, acc)
