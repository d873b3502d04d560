"""Window geometry, the one place it is derived: padding, output size, ceil_mode, dilation,
adaptive bins. Every op of the reference and every adapter asks this module.

Each spatial axis is described by an :class:`AxisWindows` table: for output position ``o``
and tap ``t`` (``t``-th element of the window along that axis), the input position it reads.
Windows are separable (a product of per-axis index sets) for every op, so a window's tap
``(t_1, ..., t_r)`` reads input ``(pos_1[o_1, t_1], ..., pos_r[o_r, t_r])``; taps are visited in
row-major order, which is the "window order" the tie policies refer to.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .errors import SpecError
from .fractional_max_pool import region_bounds
from .spec import PoolSpec


@dataclasses.dataclass(frozen=True)
class AxisWindows:
    length: int             # input length along the axis
    positions: np.ndarray   # (out, taps) int64: input position read by each tap (may be padding)
    in_window: np.ndarray   # (out, taps) bool: the tap belongs to the window (adaptive bins vary)
    in_padded: np.ndarray   # (out, taps) bool: inside the padded input [-before, length + after)

    @property
    def out(self) -> int:
        return self.positions.shape[0]

    @property
    def taps(self) -> int:
        return self.positions.shape[1]

    @property
    def in_input(self) -> np.ndarray:
        """Taps that read a real input element (padding and overhang never do)."""
        return self.in_window & (self.positions >= 0) & (self.positions < self.length)


@dataclasses.dataclass(frozen=True)
class Geometry:
    """The resolved windows of a spec over one input's spatial shape."""

    spatial_shape: tuple[int, ...]
    axes: tuple[AxisWindows, ...]
    kernel_size: tuple[int, ...] | None   # None for adaptive ops
    stride: tuple[int, ...] | None
    dilation: tuple[int, ...] | None
    pads: tuple[tuple[int, int], ...] | None  # explicit (before, after) per axis

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(a.out for a in self.axes)

    def window_counts(self, which: str) -> np.ndarray:
        """Per output position, how many taps are ``in_input`` / ``in_padded``, as an
        ``out_shape`` array (separable: the product of the per-axis counts)."""
        count = np.ones((), dtype=np.int64)
        for a in self.axes:
            per_axis = getattr(a, which).sum(axis=1)
            count = np.multiply.outer(count, per_axis)
        return count


def per_dim(field: str, value, rank: int) -> tuple:
    """Broadcast an int (or keep a per-dim tuple) to ``rank`` entries."""
    if isinstance(value, tuple):
        if len(value) != rank:
            raise SpecError(field, f"has {len(value)} entries but the input has {rank} spatial dims")
        return value
    return (value,) * rank


def same_padding(length: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """TensorFlow's SAME rule: out = ceil(L / s); the odd pixel of padding goes at the end."""
    out = -(-length // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - length, 0)
    return total // 2, total - total // 2


def padding_name(geom: "Geometry") -> str | tuple[tuple[int, int], ...]:
    """"VALID" or "SAME" where the resolved pads are exactly what that name gives for this input
    (the names TensorFlow, Keras and lax.reduce_window take), else the pads themselves."""
    if all(p == (0, 0) for p in geom.pads):
        return "VALID"
    same = tuple(same_padding(L, k, s, d) for L, k, s, d in
                 zip(geom.spatial_shape, geom.kernel_size, geom.stride, geom.dilation))
    return "SAME" if geom.pads == same else geom.pads


def explicit_pads(spec: PoolSpec, spatial_shape, kernel, stride, dilation) -> tuple[tuple[int, int], ...]:
    """Resolve the spec's padding (int, per-dim, pairs, SAME, VALID) to (before, after) per axis."""
    rank = len(spatial_shape)
    p = spec.padding
    if p == "VALID":
        return ((0, 0),) * rank
    if p == "SAME":
        return tuple(same_padding(*args) for args in zip(spatial_shape, kernel, stride, dilation))
    if isinstance(p, tuple) and p and isinstance(p[0], tuple):
        return per_dim("padding", p, rank)
    return tuple((q, q) for q in per_dim("padding", p, rank))


def pooled_length(length: int, kernel: int, stride: int, dilation: int,
                  before: int, after: int, ceil_mode: bool) -> int:
    """Output length along one axis (PyTorch's formula, generalised to asymmetric padding).

    ceil_mode keeps a last, partial window only if it starts inside the input or the left
    padding (PyTorch's rule), never one that starts in the right padding.
    """
    out = _window_count(length, kernel, stride, dilation, before, after, ceil_mode)
    return out - 1 if ceil_mode and (out - 1) * stride >= length + before else out


def ceil_drops_window(length: int, kernel: int, stride: int, dilation: int, before: int, after: int) -> bool:
    """Whether ceil_mode's rule drops a last window along this axis: one that would start in the
    right padding (kernels without the rule return it)."""
    return pooled_length(length, kernel, stride, dilation, before, after, True) < _window_count(
        length, kernel, stride, dilation, before, after, True)


def _window_count(length, kernel, stride, dilation, before, after, ceil_mode) -> int:
    span = length + before + after - dilation * (kernel - 1) - 1
    if span < 0:
        raise SpecError("kernel_size", f"window extent {dilation * (kernel - 1) + 1} (kernel {kernel}, "
                        f"dilation {dilation}) is larger than the padded input {length + before + after}")
    return (-(-span // stride) if ceil_mode else span // stride) + 1


def sliding_axis(length, kernel, stride, dilation, before, after, ceil_mode) -> AxisWindows:
    out = pooled_length(length, kernel, stride, dilation, before, after, ceil_mode)
    pos = (np.arange(out)[:, None] * stride + np.arange(kernel)[None, :] * dilation - before).astype(np.int64)
    return AxisWindows(length, pos, np.ones_like(pos, dtype=bool), (pos >= -before) & (pos < length + after))


def adaptive_bins(length: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's adaptive bins: start = floor(i*L/out), end = ceil((i+1)*L/out)."""
    i = np.arange(out, dtype=np.int64)
    return (i * length) // out, -(-((i + 1) * length) // out)


def adaptive_axis(length: int, out: int) -> AxisWindows:
    return bins_axis(length, *adaptive_bins(length, out))


def bins_axis(length: int, start: np.ndarray, end: np.ndarray) -> AxisWindows:
    """Windows [start[o], end[o]) of varying length (adaptive bins, fractional regions): the
    taps past a window's end are outside it."""
    taps = int((end - start).max()) if len(start) else 0
    pos = start[:, None] + np.arange(taps)[None, :]
    inside = pos < end[:, None]
    return AxisWindows(length, pos.astype(np.int64), inside, inside)


def check_input_shape(shape, spec: PoolSpec, field: str = "input") -> int:
    """The input must be (N, C, *spatial) with 1-3 non-empty spatial dims; returns the rank."""
    rank = len(shape) - 2
    if rank not in (1, 2, 3):
        raise SpecError(field, f"must have shape (N, C, *spatial) with 1, 2 or 3 spatial dims, got shape {tuple(shape)}")
    if spec.rank is not None and spec.rank != rank:
        raise SpecError(field, f"{spec.op}{spec.rank}d needs {spec.rank} spatial dims, got shape {tuple(shape)}")
    if any(s <= 0 for s in shape[2:]):
        raise SpecError(field, f"spatial dims must be non-empty, got shape {tuple(shape)}")
    return rank


def resolve(spec: PoolSpec, input_shape) -> Geometry:
    """The windows of ``spec`` over an input of shape (N, C, *spatial)."""
    rank = check_input_shape(input_shape, spec)
    spatial = tuple(int(s) for s in input_shape[2:])
    if spec.is_adaptive:
        sizes = per_dim("output_size", spec.output_size, rank)
        sizes = tuple(length if s is None else s for s, length in zip(sizes, spatial))
        return Geometry(spatial, tuple(adaptive_axis(L, o) for L, o in zip(spatial, sizes)),
                        None, None, None, None)
    if spec.regions is not None:
        return Geometry(spatial, tuple(bins_axis(L, start, stop) for L, (start, stop) in
                                       zip(spatial, region_bounds(spec.regions, spatial))), None, None, None, None)
    kernel = per_dim("kernel_size", spec.kernel_size, rank)
    stride = per_dim("stride", kernel if spec.stride is None else spec.stride, rank)
    dilation = per_dim("dilation", spec.dilation, rank)
    pads = explicit_pads(spec, spatial, kernel, stride, dilation)
    axes = tuple(sliding_axis(L, k, s, d, b, a, spec.ceil_mode)
                 for L, k, s, d, (b, a) in zip(spatial, kernel, stride, dilation, pads))
    return Geometry(spatial, axes, kernel, stride, dilation, pads)


def output_shape(spec: PoolSpec, input_shape) -> tuple[int, ...]:
    return tuple(input_shape[:2]) + resolve(spec, input_shape).out_shape


def window_volume(geom: Geometry) -> int:
    """Number of taps of a full window (the kernel's volume)."""
    return math.prod(a.taps for a in geom.axes)
