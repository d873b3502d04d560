"""The policy space the verdict engine searches, in one table.

A policy is the reference's tie/NaN policy plus *modifiers* that real kernels show. Each is
a composition on the reference's primitives (geometry.resolve, taps.TapPlan):
  tie, nan       reference policies; nan also takes the extended rules of poolgrad/reference/selection.py
                 (first_tap, as_neg_inf, scan), nan_tie orders NaNs unlike numeric ties
  ftz            subnormal inputs flushed to (signed) zero before comparing or summing (DAZ/FTZ CPUs);
                 "daz": compared as zero, but the selected element's own value is output (a
                 kernel that compares under DAZ and copies the winner's bits)
  padding        taps outside the input (padding and ceil_mode overhang) take part with this
                 value ("-inf" or "0"); when one is selected the forward is that value and the
                 window's gradient is dropped
  order          "column_major": window taps visited with the spatial axes reversed; this is
                 also what a separable reduction selects that reduces the first spatial axis
                 first and resolves ties per axis
  signed_zero    "ordered": +0 beats -0 (IEEE 754-2019 maximum, XLA's max)
  init           "lowest": the running maximum starts at the dtype's lowest finite value, so a
                 window of only -inf/ignored NaN gives lowest (Eigen's MaxPool forward);
                 "-inf": it starts at a -inf that wins ties, so a window whose maximum is -inf
                 selects nothing (a reduce_window from its init value, as a forward mode may)
                 "zero_if_empty": a window with no element outputs 0 (an output filled with
                 zeros that a scatter with include_self=False leaves where nothing is scattered:
                 an empty segment under a scatter reduction that excludes its init)
  zero_sign      "upstream": an element a window reads but does not select gets 0 * g of that window
                 (a gradient written as mask * g): -0.0 where every window reading it has a
                 negative upstream gradient (IEEE: -0 + -0 is -0, -0 + +0 is +0);
                 "any": the sign of a zero is not claimed (a kernel whose zeros take the sign its
                 reduction tree or its sums' terms give them): compared with -0.0 read as +0.0
  accumulate     "dtype": sums kept in the input dtype, every addition rounded, in the kernels'
                 order ("dtype_axis1_reversed": the second output axis visited backwards)
                 (poolgrad/reference/accumulate.py): the gradients of overlapping windows that
                 meet at one element, and avg/lp's window sums; the only modifier of avg/lp.
                 Claimed, not searched: "dtype_per_axis" (one axis at a time) and "rounded_sum"
                 (avg: the window's sum rounded to the dtype before the division)
  tie_within     (tie all or split) an absolute tolerance: every element whose distance to the
                 window's maximum, computed in the dtype, is below it counts as a maximum (a mask
                 written as |x - max| < tol); a NaN or infinite maximum then has none. Not searched:
                 findings claim it
  passes         "per_axis": the pool run as one-axis pools, first spatial axis first, each under
                 this policy, its gradient through them backwards (a pool built from per-axis passes:
                 a mask rule then applies per pass). Not searched: findings claim it
Policies are ordered simplest first (fewest departures from the canonical spec); the first
one that reproduces an outcome explains it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import ml_dtypes
import numpy as np

from poolgrad import reference
from poolgrad.reference import output_shape, resolve, roi_crop, selection
from poolgrad.reference.api import axis_passes
from poolgrad.reference.accumulate import acc_dtype, routed_sums_exact, scatter_taps
from poolgrad.reference.dtypes import round_to, work_dtype
from poolgrad.reference.max_pool import empty_windows, route
from poolgrad.reference.selection import tap_hits, window_max
from poolgrad.reference.taps import TapPlan, plan_for

from .compare import identical

# Base rules in search order: the reference's eight, then the kernels' NaN rules.
BASES = (
    ("first", "propagate", None), ("last", "propagate", None),
    ("first", "ignore", None), ("last", "ignore", None),
    ("all", "propagate", None), ("split", "propagate", None),
    ("all", "ignore", None), ("split", "ignore", None),
    ("first", "propagate", "last"), ("last", "propagate", "first"),
    ("first", "first_tap", None), ("last", "first_tap", None),
    ("first", "as_neg_inf", None), ("last", "as_neg_inf", None),
    ("first", "scan", None), ("last", "scan", None),
)
REFERENCE_BASES = 8
# Modifier name -> its non-default values, in search order.
MODIFIERS = {
    "ftz": (True, "daz"),
    "padding": ("-inf", "0"),
    "order": ("column_major",),
    "signed_zero": ("ordered",),
    "init": ("lowest", "-inf", "zero_if_empty"),
    "accumulate": ("dtype", "dtype_axis1_reversed"),
}


@dataclasses.dataclass(frozen=True)
class Policy:
    tie: str = "first"
    nan: str = "propagate"
    nan_tie: str | None = None
    ftz: bool | str = False
    padding: str | None = None
    order: str = "row_major"
    signed_zero: str = "equal"
    init: str | None = None
    accumulate: str | None = None
    zero_sign: str | None = None
    tie_within: float | None = None
    passes: str | None = None

    def as_dict(self) -> dict:
        """{"tie", "nan"} plus the extended keys that depart from the default."""
        out = {"tie": self.tie, "nan": self.nan}
        for f in dataclasses.fields(self)[2:]:
            value = getattr(self, f.name)
            if value != f.default:
                out[f.name] = value
        return out

    @property
    def complexity(self) -> int:
        return len(self.as_dict()) - 2

    def evaluate(self, spec, x: np.ndarray, g: np.ndarray, selections: dict | None = None) -> "Result":
        """Forward and gradient of ``x`` under this policy, in x's dtype. ``selections``: the
        selections other policies made on this ``spec`` and ``x``, by what decides them (this
        one's added): policies that differ only after the selection (init, accumulate,
        zero_sign) scan the windows once."""
        r = self._evaluate(spec, x, g, selections)
        if self.zero_sign == "upstream" and spec.is_max:
            r.grad_input = upstream_zero_signs(spec, x, g, r.grad_input)
        r.forward, r.grad_input = self.compared(r.forward), self.compared(r.grad_input)
        return r

    def compared(self, a):
        """``a`` as this policy's claims compare it: under zero_sign "any" every zero +0.0."""
        return np.where(a == 0, np.zeros_like(a), a) if self.zero_sign == "any" and a is not None else a

    def _evaluate(self, spec, x: np.ndarray, g: np.ndarray, selections: dict | None) -> "Result":
        if self.passes == "per_axis" and spec.is_max:
            return self._per_axis(spec, x, g)
        if spec.op == roi_crop.OP:  # the policy is the max pooling's over the crop, whose gradient is spread back
            plan = plan_for(spec, x.shape)
            r = self.evaluate(plan.pool, plan.rounded_crop(x), g)
            return Result(r.forward, plan.spread(r.grad_input, x.dtype), r.valid)
        if not spec.is_max:  # arithmetic: what is summed (flushed inputs) and where the sums are kept
            xs = flush_subnormals(x) if self.ftz else x
            return Result(reference.forward(spec, xs, accumulate=self.accumulate),
                          reference.backward(spec, xs, g, accumulate=self.accumulate),
                          lambda: np.ones(len(x), dtype=bool))
        if self.order == "column_major":
            axes = (0, 1, *range(x.ndim - 1, 1, -1))
            inner = dataclasses.replace(self, order="row_major")
            r = inner.evaluate(reversed_spec(spec), x.transpose(axes), g.transpose(axes))
            return Result(r.forward.transpose(axes), r.grad_input.transpose(axes), r.valid)
        xs = flush_subnormals(x) if self.ftz else x
        if self.tie in ("all", "split"):
            # The mask answers' forward is first's value (SPEC.md), the winner's own bits under daz,
            # +0.0 over -0.0 where zeros are ordered (a reduction's max of tied zeros).
            fwd = (dataclasses.replace(self, tie="first").evaluate(spec, x, g, selections).forward
                   if self.ftz == "daz" or self.signed_zero == "ordered" or self.init == "zero_if_empty"
                   else reference.forward(spec, xs, tie=self.tie, nan=self.nan))
            bwd = (reference.backward(spec, xs, g, tie=self.tie, nan=self.nan, accumulate=self.accumulate)
                   if self.tie_within is None else self._near_maxima_gradient(spec, xs, g))
            return Result(fwd, bwd, lambda: mask_answer_valid(self, spec, x, xs))
        plan, xw, best, sel = self._select(spec, xs, selections)
        if self.init == "lowest":
            lowest = float(ml_dtypes.finfo(x.dtype).min)
            best = np.where((sel < 0) | (best < lowest), lowest, best)
        elif self.init == "zero_if_empty":
            best = np.where(plan.geom.window_counts("in_input") == 0, 0.0, best)
        best = empty_windows(plan, best)  # the op's value for a window without elements (RoI pooling: 0)
        if self.ftz == "daz":  # the winner's own bits: where it was flushed, its subnormal value
            xo = plan.pad(x.astype(work_dtype(x.dtype), copy=False))
            own = xo.reshape(-1)[plan.flat_index(np.maximum(sel, 0), xo.shape)]
            best = np.where((sel >= 0) & (own != best) & (best == 0), own, best)
        gw = np.asarray(g).astype(x.dtype).astype(np.float64)
        grad = plan.unpad(route(plan, xw.shape, sel, gw, acc_dtype(self.accumulate, x.dtype)))
        # Validity is about the input itself: what was compared (xw) unless it was flushed.
        return Result(round_to(best, x.dtype), round_to(grad, x.dtype),
                      lambda: selection_valid(plan, plan.pad(x.astype(work_dtype(x.dtype), copy=False))
                                              if self.ftz else xw, sel))


    def _per_axis(self, spec, x: np.ndarray, g: np.ndarray) -> "Result":
        """The one-axis passes (reference.api.axis_passes) under this policy: the forward through
        them in order, the gradient back through them; a valid subgradient where every pass's is."""
        inner = dataclasses.replace(self, passes=None)
        steps = axis_passes(spec, resolve(spec, x.shape))
        inputs = [x]
        for step in steps[:-1]:
            inputs.append(inner.evaluate(step, inputs[-1], np.zeros(output_shape(step, inputs[-1].shape), x.dtype)).forward)
        results = [inner.evaluate(steps[-1], inputs[-1], g)]
        for step, xi in zip(reversed(steps[:-1]), reversed(inputs[:-1])):
            results.append(inner.evaluate(step, xi, results[-1].grad_input))
        return Result(results[0].forward, results[-1].grad_input,
                      lambda: np.logical_and.reduce([r.valid() for r in results]))

    def _near_maxima_gradient(self, spec, xs: np.ndarray, g: np.ndarray) -> np.ndarray:
        """tie all/split under ``tie_within``: the window's gradient to every real element
        within the tolerance of its maximum (shared among them for split)."""
        plan = plan_for(spec, xs.shape)
        xw = plan.pad(xs.astype(work_dtype(xs.dtype), copy=False))
        m = window_max(plan, xw, self.nan)
        tol = round_to(np.float64(self.tie_within), xs.dtype)
        hits = []
        with np.errstate(invalid="ignore", divide="ignore"):  # inf - inf; a window with none
            for index, valid in plan.taps:
                hit = round_to(np.abs(xw[index].astype(np.float64) - m), xs.dtype) < tol
                hits.append(hit if valid is None else hit & valid)
            gw = np.asarray(g).astype(xs.dtype).astype(np.float64)
            share = gw if self.tie == "all" else gw / np.sum(hits, axis=0)
        grad = scatter_taps(plan, xw.shape, [np.where(h, share, 0.0) for h in hits], acc_dtype(self.accumulate, xs.dtype))
        return round_to(plan.unpad(grad), xs.dtype)

    def _select(self, spec, xs: np.ndarray, selections: dict | None = None):
        """(plan, padded input, best value, selected tap or -1) of a first/last-type policy
        (``selections``: evaluate's; the shared arrays are read-only)."""
        key = (bool(self.ftz), self.tie, self.nan, self.nan_tie, self.signed_zero, self.padding, self.init == "-inf")
        if selections is not None and key in selections:
            return selections[key]
        plan = plan_for(spec, xs.shape)
        xw = plan.pad(xs.astype(work_dtype(xs.dtype), copy=False))
        pad_value = None if self.padding is None else float(self.padding)
        best, sel = selection.scan(plan, xw, tie=self.tie, nan=self.nan, nan_tie=self.nan_tie,
                                   signed_zero=self.signed_zero == "ordered", pad_value=pad_value,
                                   seeded=self.init == "-inf")
        if selections is not None:
            best.flags.writeable = sel.flags.writeable = False
            selections[key] = plan, xw, best, sel
        return plan, xw, best, sel

    def jvp(self, spec, x: np.ndarray, tangent: np.ndarray) -> np.ndarray:
        """Forward mode along ``tangent`` under this policy, in x's dtype: the gather through
        the selection that evaluate()'s gradient scatters through (a selected padding tap, or
        none, carries tangent 0)."""
        if self.order == "column_major":
            axes = (0, 1, *range(x.ndim - 1, 1, -1))
            inner = dataclasses.replace(self, order="row_major")
            return inner.jvp(reversed_spec(spec), x.transpose(axes), tangent.transpose(axes)).transpose(axes)
        xs = flush_subnormals(x) if self.ftz else x
        if self.tie in ("all", "split"):
            return reference.jvp(spec, xs, tangent, tie=self.tie, nan=self.nan)
        plan, _, _, sel = self._select(spec, xs)
        tw = plan.pad(np.asarray(tangent).astype(x.dtype).astype(np.float64))
        picked = tw.reshape(-1)[plan.flat_index(np.maximum(sel, 0), tw.shape)]
        return round_to(np.where(sel >= 0, picked, 0.0), x.dtype)


@dataclasses.dataclass
class Result:
    forward: np.ndarray
    grad_input: np.ndarray
    valid: object  # () -> per sample (along N): is this routing a valid subgradient (computed on demand)


def upstream_zero_signs(spec, x: np.ndarray, g: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """``grad`` with -0.0 at the zeros whose every reading window has a negative (sign bit set)
    upstream gradient. Windows per element are counted by tie=all on a constant input, where every
    real element is a maximum of every window that reads it."""
    flat = np.zeros_like(x)
    reads = reference.backward(spec, flat, np.ones_like(g, dtype=x.dtype), tie="all")
    negative = reference.backward(spec, flat, np.signbit(g).astype(x.dtype), tie="all")
    return np.where((grad == 0) & (reads > 0) & (negative == reads), np.copysign(0.0, -1.0), grad).astype(grad.dtype)


def reversed_spec(spec):
    """The spec for the input with its spatial axes reversed."""
    def rev(v):
        return tuple(reversed(v)) if isinstance(v, tuple) else v
    return dataclasses.replace(spec, **{f: rev(getattr(spec, f)) for f in
                                        ("kernel_size", "stride", "padding", "dilation", "output_size", "regions")})


def flush_subnormals(x: np.ndarray) -> np.ndarray:
    tiny = float(ml_dtypes.finfo(x.dtype).smallest_normal)
    xf = x.astype(np.float64)
    return np.where((np.abs(xf) < tiny) & (xf != 0), np.copysign(0.0, xf), xf).astype(x.dtype)


def window_maxima(plan: TapPlan, xw: np.ndarray, nan: str) -> list[np.ndarray]:
    """Per tap, the windows in which that tap holds a maximum of the window's real elements."""
    return [hit.copy() for _, hit in tap_hits(plan, xw, window_max(plan, xw, nan), nan)]


def selection_valid(plan: TapPlan, xw: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """Per sample (along N): every window with a real element routes its whole gradient to one
    of its maxima (NaN counted as the maximum, or as absent: either reading, window by window)."""
    ok = np.zeros(sel.shape, dtype=bool)
    for nan in ("propagate", "ignore"):
        for t, hit in enumerate(window_maxima(plan, xw, nan)):
            ok |= (sel == t) & hit
    nonempty = plan.geom.window_counts("in_input") > 0
    nan_only = np.ones(sel.shape, dtype=bool)  # windows of only NaN under "ignore" route nothing
    for index, valid in plan.taps:
        real_number = ~np.isnan(xw[index]) if valid is None else valid & ~np.isnan(xw[index])
        nan_only &= ~real_number
    return _per_sample(ok | ~nonempty | ((sel < 0) & nan_only))


def mask_answer_valid(policy: Policy, spec, x: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Per sample (along N): 'split' conserves each window's gradient among its maxima; 'all'
    does only where no window has two maxima. Either is invalid if flushing made non-maxima tie."""
    plan = plan_for(spec, x.shape)
    hits = window_maxima(plan, plan.pad(xs.astype(work_dtype(x.dtype))), policy.nan)
    true_hits = window_maxima(plan, plan.pad(x.astype(work_dtype(x.dtype))), policy.nan)
    ok = _per_sample(np.logical_and.reduce([~h | th for h, th in zip(hits, true_hits)]))
    return ok if policy.tie == "split" else ok & _per_sample(sum(h.astype(np.int64) for h in hits) <= 1)


def _per_sample(ok: np.ndarray) -> np.ndarray:
    """``ok`` (shaped N, C, *output) reduced to one truth per sample."""
    return ok.all(axis=tuple(range(1, ok.ndim)))


def features(spec, x: np.ndarray, g: np.ndarray) -> dict:
    """Which policy dimensions can change any result on this case (the others are skipped)."""
    if spec.op == roi_crop.OP:  # the max pooling's over the crop
        plan = plan_for(spec, x.shape)
        return features(plan.pool, plan.rounded_crop(x), g)
    if not spec.is_max:
        return {"selection": False, "nan": False, **{name: False for name in MODIFIERS},
                "accumulate": accumulation_matters(spec, x, g), "ftz": _has_subnormal(x)}
    plan = plan_for(spec, x.shape)
    geom = plan.geom
    xf = x.astype(np.float64)
    has_nan = bool(np.isnan(xf).any())
    zeros = xf[xf == 0]
    return {
        "selection": True,
        "accumulate": not routed_sums_exact(plan, plan.pad(x).shape, x.dtype, np.asarray(g).astype(x.dtype)),
        "nan": has_nan,
        "ftz": _has_subnormal(x),
        # a segment's taps past its size read no element, padded or not
        "padding": not spec.is_segment and any(bool((~a.in_input).any()) for a in geom.axes),
        "order": sum(a.taps > 1 for a in geom.axes) > 1,
        "signed_zero": bool(np.signbit(zeros).any() and (~np.signbit(zeros)).any()),
        "init": has_nan or bool(np.isneginf(xf).any()) or geom.window_counts("in_input").min() == 0,
    }


def _has_subnormal(x: np.ndarray) -> bool:
    xf = np.abs(x.astype(np.float64))
    return bool(((xf < float(ml_dtypes.finfo(x.dtype).smallest_normal)) & (xf != 0)).any())


def accumulation_matters(spec, x: np.ndarray, g: np.ndarray) -> bool:
    """avg/lp: whether sums kept in the dtype change the forward or the gradient (the
    reference both ways, compared bit for bit; float64 never differs)."""
    if x.dtype == np.float64:
        return False
    with np.errstate(all="ignore"):
        return not all(identical(f(spec, x, *args, accumulate="dtype"), f(spec, x, *args))
                       for f, args in ((reference.forward, ()), (reference.backward, (g,))))


def candidates(feat: dict) -> tuple[Policy, ...]:
    """Every policy that can differ on a case with these features, simplest first. avg/lp have
    no selection: their one base is the canonical policy."""
    return _candidates(tuple(sorted(feat.items())))


@functools.lru_cache(maxsize=None)  # a few dozen feature sets; building one list took ~1 ms
def _candidates(features: tuple) -> tuple[Policy, ...]:
    feat = dict(features)
    bases = [b for b in BASES if feat["nan"] or (b[1] == "propagate" and b[2] is None)]
    bases = bases if feat["selection"] else bases[:1]
    mods = [(name, v) for name, values in MODIFIERS.items() if feat[name] for v in values]
    combos = [c for r in range(len(mods) + 1) for c in itertools.combinations(mods, r)
              if len({name for name, _ in c}) == r]
    out = []
    for i, (tie, nan, nan_tie) in enumerate(bases):
        for combo in combos:
            if tie in ("all", "split") and any(n in ("padding", "signed_zero") or v in ("daz", "lowest", "-inf")
                                               for n, v in combo):
                continue  # mask answers come from the reference, which has no such knobs
            out.append((int(i >= REFERENCE_BASES) + len(combo), i,
                        Policy(tie, nan, nan_tie, **dict(combo))))
    out.sort(key=lambda item: item[:2])
    return tuple(p for _, _, p in out)
