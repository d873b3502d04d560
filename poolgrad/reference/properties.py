"""Properties of a case, computed from its spec and input: what a finding's scope selects on.

A finding says *when* a framework path departs from the spec in terms of the case itself ("a window
with several NaNs", "a window whose real elements are all -inf and that touches padding"),
never in terms of catalogue families or case ids, so it judges a user's case, a fuzzed case
and the catalogue's alike. Every property is about the windows the spec reads (padding and
ceil_mode overhang are never real elements) or about the input's values; the names and their
meaning are the table in SPEC.md ("Case properties").
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .accumulate import scatter_taps
from .dtypes import work_dtype
from .geometry import ceil_drops_window, same_padding
from . import roi_crop, roi_pool
from .segment_pool import is_sorted
from .spec import PoolSpec
from .taps import plan_for

# Windows x taps elements per block of planes gathered at once: the gather and the per-tap
# tests cost per numpy call below that size, and a stack's block stays a few MiB.
BLOCK_ELEMENTS = 1 << 17
NEAR_TIE = 1e-5  # the absolute tolerance of "near_ties"

PROPERTIES = {
    "nan": "a window holds a NaN",
    "nan_several": "a window holds two or more NaNs",
    "nan_with_number": "a window holds a NaN and a number",
    "nan_only": "a window's real elements are all NaN",
    "nan_not_first": "a window holds a NaN that is not its first real element",
    "number_then_nan": "a window's first real element is a number and it holds a NaN",
    "ties": "a window's largest number occurs more than once",
    "ties_if_flushed": "a window's largest number occurs more than once when subnormals count as zero (flush-to-zero CPUs)",
    "near_ties": "a window holds a number other than its largest within 1e-5 of it (kernels that mark as maxima the elements less than 1e-5 from the maximum take both)",
    "infinite_max": "a window's largest number is +inf or -inf",
    "infinity": "a window holds +inf or -inf (roi_align: a sample reads one at a nonzero weight)",
    "signed_zero_tie": "a window's largest number is zero and it holds both -0.0 and +0.0",
    "negative_zero_max": "a window's largest number is -0.0: it holds -0.0 and no +0.0",
    "zero_max": "a window's largest number is zero (+0.0 or -0.0)",
    "subnormal": "the input holds a subnormal value",
    "neginf_window": "a window's real elements are all -inf",
    "no_finite_window": "a window holds no finite number (its real elements are all -inf or NaN)",
    "neginf_window_at_padding": "a window's real elements are all -inf and it reads padding",
    "neginf_window_after_padding": "a window's real elements are all -inf and its first tap (window order) is padding",
    "no_finite_window_after_padding": "a window holds no finite number and its first tap (window order) is padding",
    "padding": "a window reads padding",
    "padding_could_win": "a window reads padding and its largest real element is negative or -0.0 (a zero pad would win or tie)",
    "empty_window": "a window has no real element",
    "nonfinite_unread": "an element that no window reads is NaN or infinite",
    "ceil_overhang": "a ceil_mode window reaches past the padded input",
    "ceil_window_dropped": "ceil_mode drops a last window that would start in the right padding (PyTorch's rule; without it the output is one longer on some axis)",
    "zero_window": "a window's real elements are all zero",
    "zero_power_sum": "lp_pool: a window's sum of x ** p over its real elements is exactly zero (all zeros, or terms that cancel)",
    "power_sum_overflows": "lp_pool: a window's sum of |x| ** p exceeds the dtype's largest finite value",
    "window_sum_overflows": "avg_pool, adaptive_avg_pool, segment_avg_pool: a window's sum of |x| exceeds the dtype's largest finite value",
    "power_overflows": "lp_pool: some |x| ** p of a real element exceeds the dtype's largest finite value",
    "dilation": "the windows are dilated",
    "excludes_padding": "avg_pool with count_include_pad false: the divisor counts real elements only",
    "divisor_override": "avg_pool with a divisor_override",
    "norm_type_one": "lp_pool with norm_type 1 (its power and root are the identity)",
    "one_tap_windows": "every window has one tap (kernel 1 or adaptive bins of one element): pooling is a copy",
    "explicit_padding": "the padding is neither none (VALID) nor what the SAME rule adds for this input",
    "same_asymmetric": "the padding is what the SAME rule adds for this input, and more after than before on some axis",
    "asymmetric_padding": "the pads before and after differ on some axis (explicit pads, or what the SAME rule adds)",
    "same_rule": "the spec asks for padding by the SAME rule (padding 'SAME'), not by pads",
    "ceil_mode": "the spec asks for ceil_mode (output lengths rounded up), whether or not it adds a window",
    "valid_rule": "the spec asks for no padding by the VALID rule (padding 'VALID'), not by pads of 0",
    "kernel_over_input": "the window is longer than the input along some axis (only padding makes it fit)",
    "empty": "the input has no elements",
    "taps_over_25": "a window has more than 25 taps (where a compiler may stop unrolling a window)",
    "count_over_precision": "a window has more real elements than the dtype counts by adding ones (2048 in float16, 256 in bfloat16, 2 ** 24 in float32): a count kept in the dtype stops there",
    "ties_over_precision": "a window's tied maxima outnumber what the dtype counts by adding ones (2048 in float16, 256 in bfloat16): a count of the ties kept in the dtype stops there",
    "uneven_bins": "adaptive pooling whose input length is not a multiple of the output length on some axis",
    "non_overlapping": "windows that neither overlap nor leave gaps: stride = kernel and no dilation, or adaptive bins that divide the input evenly, or fractional regions that partition the input",
    "adaptive_unit_axis": "adaptive pooling whose output length or input length is 1 on some axis",
    "block_view_over_5_dims": "windows that tile the input, viewed as blocks (N, out_1, k_1, ..., out_d, k_d, C) with the reduced result broadcast back over them, alternate over more than 5 dims once dims of 1 are dropped and neighbours that broadcast alike are merged (N counted as more than 1: a call stacks cases along N)",
    "adaptive_unit_last_axis": "adaptive pooling whose output length or input length is 1 on the last spatial axis",
    "fractional_unit_steps": "fractional regions of one size that start at every position along some axis (output + size - 1 = input length)",
    "fractional_bounds_outnumber_input": "fractional pooling whose region bounds (regions + 1 per axis), multiplied over the axes, outnumber the input's elements (N·C·spatial)",
    "unsorted_segment_ids": "segment pooling whose segment_ids are not in increasing order",
    "one_element_segment": "segment pooling with a segment of one item",
    **roi_pool.PROPERTIES,
    **roi_crop.PROPERTIES,
}


def case_properties(spec: PoolSpec, x: np.ndarray) -> frozenset[str]:
    """The names of PROPERTIES that hold for ``x`` (N, C, *spatial) under ``spec``."""
    return properties_of_cases(spec, [x])[0]


def properties_of_cases(spec: PoolSpec, xs: list[np.ndarray]) -> list[frozenset[str]]:
    """``case_properties`` of each of ``xs`` under ``spec``. Inputs of one dtype and shape past
    N (a framework call's cases) are stacked along N and their windows walked once: walking the
    taps costs the same for one case as for a call's hundred."""
    if spec.is_roi:  # each case alone (its boxes name its own images)
        found = [(roi_crop.properties(spec, x, case_properties) if spec.op == roi_crop.OP
                  else roi_pool.properties(spec, x)) | _input_properties(x) for x in xs]
        return [frozenset(p | ({"ties_if_flushed"} if "ties" in p else set())) for p in found]
    found: list[frozenset[str] | None] = [None] * len(xs)
    stacks: dict[tuple, list[int]] = {}
    for i, x in enumerate(xs):
        stacks.setdefault((x.dtype, x.shape[1:]), []).append(i)
    for members in stacks.values():
        for i, props in zip(members, _stacked_properties(spec, [xs[i] for i in members])):
            found[i] = props
    return found


def _block_broadcast_dims(channels: int, blocks: list[tuple[int, int]]) -> int:
    """The dims a block reduction's result broadcasts back over (``blocks``: (out, k) per
    spatial axis): dims of 1 on both sides dropped, neighbours that broadcast alike merged."""
    dims = [(2, False), *((d, broadcast) for out, k in blocks for d, broadcast in ((out, False), (k, True))),
            (channels, False)]
    kept = [broadcast for size, broadcast in dims if size > 1]
    return sum(1 for i, b in enumerate(kept) if i == 0 or b != kept[i - 1])


def _exact_count(dtype) -> int:
    """The largest count the dtype reaches by adding ones: from 2 ** (mantissa bits + 1) on,
    adding one is a tie that rounds back to even."""
    return 2 ** (ml_dtypes.finfo(dtype).nmant + 1)


def _spec_properties(spec: PoolSpec, shape: tuple[int, ...]) -> set[str]:
    """The properties the spec and the input's shape decide, whatever the values."""
    found = set()
    if spec.dilation is not None and any(d > 1 for d in np.atleast_1d(spec.dilation)):
        found.add("dilation")
    if spec.op == "avg_pool" and not spec.count_include_pad:
        found.add("excludes_padding")
    if spec.op == "avg_pool" and spec.divisor_override is not None:
        found.add("divisor_override")
    if spec.op == "lp_pool" and float(spec.norm_type) == 1.0:
        found.add("norm_type_one")
    if spec.kernel_size is not None and not spec.is_adaptive:
        kernel = np.atleast_1d(spec.kernel_size)
        stride = kernel if spec.stride is None else np.atleast_1d(spec.stride)
        if np.all(stride == kernel) and "dilation" not in found:
            found.add("non_overlapping")
    if spec.ceil_mode:
        found.add("ceil_mode")
    if spec.padding in ("SAME", "VALID"):
        found.add(f"{spec.padding.lower()}_rule")
    geom = plan_for(spec, shape).geom
    if geom.pads is not None:
        same = tuple(same_padding(a.length, k, s, d) for a, k, s, d in
                     zip(geom.axes, geom.kernel_size, geom.stride, geom.dilation))
        if any(p != (0, 0) for p in geom.pads) and geom.pads != same:
            found.add("explicit_padding")
        if geom.pads == same and any(before != after for before, after in same):
            found.add("same_asymmetric")
        if any(before != after for before, after in geom.pads):
            found.add("asymmetric_padding")
        if spec.ceil_mode and any(ceil_drops_window(a.length, k, s, d, before, after) for a, k, s, d, (before, after)
                                  in zip(geom.axes, geom.kernel_size, geom.stride, geom.dilation, geom.pads)):
            found.add("ceil_window_dropped")
        if any((k - 1) * d + 1 > a.length for a, k, d in zip(geom.axes, geom.kernel_size, geom.dilation)):
            found.add("kernel_over_input")
    if int(np.prod([a.taps for a in geom.axes])) > 25:
        found.add("taps_over_25")
    if all(a.taps == 1 for a in geom.axes):
        found.add("one_tap_windows")
    if spec.is_adaptive and any(a.length % a.out for a in geom.axes if a.out):
        found.add("uneven_bins")
    elif spec.is_adaptive:
        found.add("non_overlapping")
    if spec.regions is not None and all(  # fractional regions that partition every dim
            np.array_equal(np.bincount(a.positions[a.in_window], minlength=a.length), np.ones(a.length))
            for a in geom.axes):
        found.add("non_overlapping")
    if spec.regions is not None and any(  # regions of one size, one starting at every position
            len({stop - start for start, stop in dim}) == 1 and [start for start, _ in dim] == list(range(len(dim)))
            and dim[-1][1] == a.length for dim, a in zip(spec.regions, geom.axes)):
        found.add("fractional_unit_steps")
    if spec.is_segment and not is_sorted(spec.segment_ids):
        found.add("unsorted_segment_ids")
    if spec.is_segment and (geom.window_counts("in_input") == 1).any():
        found.add("one_element_segment")
    if ("non_overlapping" in found and spec.regions is None and not spec.is_segment
            and all(a.length == a.out * a.taps for a in geom.axes)
            and _block_broadcast_dims(shape[1], [(a.out, a.taps) for a in geom.axes]) > 5):
        found.add("block_view_over_5_dims")
    unit = [spec.is_adaptive and (a.length == 1 or a.out == 1) for a in geom.axes]
    if any(unit):
        found.add("adaptive_unit_axis")
    if unit and unit[-1]:
        found.add("adaptive_unit_last_axis")
    if any(bool((a.in_window & ~a.in_padded).any()) for a in geom.axes):
        found.add("ceil_overhang")
    return found


def _stacked_properties(spec: PoolSpec, xs: list[np.ndarray]) -> list[frozenset[str]]:
    """``properties_of_cases`` for inputs of one dtype and shape past N."""
    x = xs[0] if len(xs) == 1 else np.concatenate(xs)
    common = _spec_properties(spec, x.shape)
    counts = plan_for(spec, x.shape).geom.window_counts("in_input")
    if counts.size and int(counts.max()) > _exact_count(x.dtype):
        common.add("count_over_precision")
    tiny = float(ml_dtypes.finfo(x.dtype).smallest_normal)
    found = [common | ({"empty"} if xi.size == 0 else set()) for xi in xs]
    if spec.regions is not None:
        bounds = int(np.prod([len(dim) + 1 for dim in spec.regions]))
        for props, xi in zip(found, xs):
            if bounds > xi.size:
                props.add("fractional_bounds_outnumber_input")
    for props, xi in zip(found, xs):
        if _subnormal(xi, tiny).any():
            props.add("subnormal")
    if x.size:
        names, hits = _window_flags(spec, x)
        counts = [len(xi) for xi in xs]
        starts = np.cumsum([0] + counts[:-1])
        filled = [i for i, n in enumerate(counts) if n]
        # per flag and case: whether any of the case's planes has a window where it holds
        per_case = np.logical_or.reduceat(hits, starts[filled], axis=1)
        for column, i in enumerate(filled):
            found[i].update(name for name, hit in zip(names, per_case[:, column]) if hit)
    nonfinite = [i for i, xi in enumerate(xs) if xi.size and not np.isfinite(xi.astype(np.float64)).all()]
    if nonfinite:
        unread = _unread(spec, x.shape)
        for i in nonfinite:
            if (~np.isfinite(xs[i].astype(np.float64)) & unread).any():
                found[i].add("nonfinite_unread")
    flushable = [i for i, props in enumerate(found) if "subnormal" in props and "ties" not in props]
    if flushable:
        flushed = [np.where(_subnormal(xs[i], tiny), np.copysign(0.0, xs[i].astype(np.float64)), xs[i]).astype(x.dtype)
                   for i in flushable]
        for i, props in zip(flushable, _stacked_properties(spec, flushed)):
            if "ties" in props:
                found[i].add("ties_if_flushed")
    for props in found:
        if "ties" in props:
            props.add("ties_if_flushed")
    return [frozenset(props) for props in found]


def _unread(spec: PoolSpec, shape) -> np.ndarray:
    """Per input element of a (1, 1, *spatial) plane: no window reads it (a stride past the
    kernel, a VALID or floor-mode edge)."""
    plan = plan_for(spec, (1, 1, *shape[2:]))
    padded = plan.pad(np.zeros((1, 1, *shape[2:]))).shape
    out = (1, 1, *plan.geom.out_shape)
    reads = scatter_taps(plan, padded, [np.ones(out) if valid is None else np.broadcast_to(valid, out).astype(float)
                                        for _, valid in plan.taps], np.dtype(np.float64))
    return plan.unpad(reads) == 0


def _input_properties(x: np.ndarray) -> set[str]:
    """What RoI cases add from the input's values alone (a tie stays one when flushed)."""
    return {"subnormal"} if _subnormal(x, float(ml_dtypes.finfo(x.dtype).smallest_normal)).any() else set()


def _subnormal(x: np.ndarray, tiny: float) -> np.ndarray:
    xf = x.astype(np.float64)
    return (np.abs(xf) < tiny) & (xf != 0)


def _window_flags(spec: PoolSpec, x: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The value properties, and for each of them and each plane along N whether one of the
    plane's windows has it ((properties, N) bool). Every window's taps are gathered at once,
    (planes, windows, taps) in window order, a block of planes at a time."""
    plan = plan_for(spec, x.shape)
    xw = plan.pad(x.astype(work_dtype(x.dtype), copy=False))
    windows = math.prod(plan.geom.out_shape)
    taps = len(plan.taps)
    table = plan.window_table(xw.shape)[0].reshape(windows, taps)
    real, padded = _tap_masks(plan.geom)
    before = np.cumsum(real, axis=1) - real  # real taps ahead of each tap in its window
    seen = real | padded
    # the window's first tap that is real or padding is padding
    leads_padding = (seen.any(axis=1) & padded[np.arange(windows), seen.argmax(axis=1)] if taps
                     else np.zeros(windows, dtype=bool))
    reads_padding = padded.any(axis=1)
    n_real = real.sum(axis=1)
    has_real = n_real > 0
    largest = float(ml_dtypes.finfo(x.dtype).max)
    counted = _exact_count(x.dtype)
    planes = xw.reshape(len(x) * x.shape[1], -1)
    step = max(1, BLOCK_ELEMENTS // max(1, windows * taps))
    blocks = [_value_flags(spec, planes[i:i + step][:, table], real, before, n_real, has_real, reads_padding,
                           leads_padding, largest, counted) for i in range(0, len(planes), step)]
    per_row = np.concatenate([hits for _, hits in blocks], axis=1) if len(blocks) > 1 else blocks[0][1]
    return blocks[0][0], per_row.reshape(len(per_row), len(x), -1).any(axis=2)


def _value_flags(spec, v, real, before, n_real, has_real, reads_padding, leads_padding,
                 largest, counted) -> tuple[list[str], np.ndarray]:
    """The value properties, and per property and row of ``v`` (planes, windows, taps) whether
    one of the row's windows has it ((properties, rows) bool)."""
    isnan = np.isnan(v)
    real_nan = real & isnan
    n_nan = real_nan.sum(axis=2)
    nan_late = (real_nan & (before > 0)).any(axis=2)
    first_number = (real & ~isnan & (before == 0)).any(axis=2)
    n_neginf = (real & np.isneginf(v)).sum(axis=2)
    n_finite = (real & np.isfinite(v)).sum(axis=2)
    zero = real & (v == 0)
    n_zero = zero.sum(axis=2)
    n_neg0 = (zero & np.signbit(v)).sum(axis=2)
    n_pos0 = n_zero - n_neg0
    top = np.where(real & ~isnan, v, -np.inf).max(axis=2, initial=-np.inf)
    n_max = (real & (v == top[..., None])).sum(axis=2)
    numbers = n_nan < n_real
    with np.errstate(invalid="ignore"):  # inf - inf
        near = (real & (v != top[..., None]) & (np.abs(v - top[..., None]) < NEAR_TIE)).any(axis=2)
    neginf_only = has_real & (n_neginf == n_real)
    no_finite = has_real & (n_finite == 0) & (n_nan + n_neginf == n_real)
    flags = {
        "nan": n_nan > 0,
        "nan_several": n_nan > 1,
        "nan_with_number": (n_nan > 0) & numbers,
        "nan_only": has_real & (n_nan == n_real),
        "nan_not_first": nan_late,
        "number_then_nan": first_number & (n_nan > 0),
        "ties": (n_max > 1) & numbers,
        "ties_over_precision": (n_max > counted) & numbers,
        "near_ties": near,
        "infinite_max": numbers & np.isinf(top),
        "infinity": (real & np.isinf(v)).any(axis=2),
        "signed_zero_tie": (top == 0) & (n_pos0 > 0) & (n_neg0 > 0),
        "negative_zero_max": (top == 0) & (n_pos0 == 0) & (n_neg0 > 0),
        "zero_max": numbers & (top == 0),
        "neginf_window": neginf_only,
        "no_finite_window": no_finite,
        "neginf_window_at_padding": neginf_only & reads_padding,
        "neginf_window_after_padding": neginf_only & leads_padding,
        "no_finite_window_after_padding": no_finite & leads_padding,
        "padding": reads_padding,
        "padding_could_win": reads_padding & has_real & ((top < 0) | ((top == 0) & (n_pos0 == 0))),
        "empty_window": ~has_real,
        "zero_window": has_real & (n_zero == n_real),
    }
    sums = {"zero_power_sum": False, "power_sum_overflows": False, "window_sum_overflows": False,
            "power_overflows": False}
    if spec.op.endswith("avg_pool"):
        sums["window_sum_overflows"] = _sequential_sum(np.where(real, np.abs(v.astype(np.float64)), 0.0)) > largest
    if spec.op == "lp_pool":
        with np.errstate(over="ignore", invalid="ignore"):
            vf = v.astype(np.float64)
            power = np.where(real, np.abs(vf) ** float(spec.norm_type), 0.0)
            # the sum the spec's lp gradient is 0 at (reference/lp_pool.py)
            sums["zero_power_sum"] = has_real & (_sequential_sum(np.where(real, vf ** float(spec.norm_type), 0.0)) == 0)
            sums["power_sum_overflows"] = _sequential_sum(power) > largest
            sums["power_overflows"] = np.fmax.reduce(power, axis=2, initial=0.0) > largest
    flags.update(sums)
    rows = len(v)
    # a flag of the windows alone (or of none) holds in every row or in none
    return list(flags), np.stack([hit.any(axis=1) if np.ndim(hit) == 2 else np.full(rows, bool(np.any(hit)))
                                  for hit in flags.values()])


def _sequential_sum(terms: np.ndarray) -> np.ndarray:
    """The sum over the last axis in window order, one addition at a time (a property at an
    overflow's edge must not depend on a pairwise order)."""
    return np.cumsum(terms, axis=2)[..., -1] if terms.shape[2] else np.zeros(terms.shape[:2])


def _tap_masks(geom) -> tuple[np.ndarray, np.ndarray]:
    """(windows, taps) bool: the tap reads a real element; it reads padding (inside the padded
    input, outside the input)."""
    rank = len(geom.axes)
    real = inside = np.ones((1,) * 2 * rank, dtype=bool)
    for d, a in enumerate(geom.axes):
        shape = [1] * 2 * rank
        shape[d], shape[rank + d] = a.out, a.taps
        real = real & a.in_input.reshape(shape)
        inside = inside & (a.in_window & a.in_padded).reshape(shape)
    full = geom.out_shape + tuple(a.taps for a in geom.axes)
    windows, taps = math.prod(geom.out_shape), math.prod(full[rank:])
    return tuple(np.broadcast_to(m, full).reshape(windows, taps) for m in (real, inside & ~real))
