"""Max-type gradients whose sums round: routing exact, the sums within any order's bound.

Where the windows that reach one input element route several gradients to it, the kernel adds
them in an order and an accumulation type of its own (a blocked, threaded backward adds
them otherwise than a scalar loop). The spec adds them exactly and rounds once. A
result *routes* as a policy when every element receives exactly the policy's contributions:
where at most one contribution arrives that is bit for bit, and where n arrive the sum may
lie anywhere that some order of additions kept in the case dtype can put it,

    |observed - reference| <= (n - 1) * eps(dtype) * sum |contributions| + ulp(reference)

(the recursive-summation bound with unit roundoff eps / 2, doubled, plus the two final
roundings). Under tie = "split" each of the n contributions is a share g / k that a kernel may
round before adding (g * (1 / k) in the dtype), so there the bound counts n terms, and an element
with one share is within it too. A dropped, added or misplaced contribution moves a sum by a whole term, which this
bound does not cover unless the term is below the dtype's resolution of the sum. SPEC.md,
"Sums of routed gradients".
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

from poolgrad.reference.accumulate import F64, scatter_taps
from poolgrad.reference.dtypes import round_to
from poolgrad.reference.taps import plan_for

from .compare import as_f64, ulp_of

ANY_ORDER = "any"  # the accumulate value a verdict's policy names for sums in another order


def routes_as(observed, policy) -> bool:
    """Whether the observed gradient (``observed``: an outcome's arrays against its case's
    reference, verdicts.observed.Observed) routes as ``policy``, its sums in any order. A policy
    that claims an order (accumulate) is matched bit for bit."""
    case, grad_input = observed.reference, observed.arrays[1]
    want = case.result(policy).grad_input
    if np.shape(grad_input) != want.shape:
        return False
    split, every_tap = policy.tie == "split", policy.padding is not None
    # Most of the answer depends on the arrays alone, and many candidates of the policy search
    # give the same gradient on a case: it is found once per pair of arrays.
    key = ("routes", observed.fingerprint[1], want.tobytes(), split, every_tap, policy.accumulate is None)
    def decided():
        exact = observed.same_bits(1, want)
        return exact, _decided_by_arrays(case, exact, grad_input[~exact], want[~exact], split, every_tap,
                                         policy.accumulate)
    exact, alone = case.derived(key, decided)
    if alone is not None:
        return alone
    count, size = case.derived(("routed", policy), lambda: _routed(case, policy))
    return _within(case, split, count[~exact], size[~exact], grad_input[~exact], want[~exact])


def _decided_by_arrays(case, exact, got, want, split: bool, every_tap: bool, accumulate) -> bool | None:
    """routes_as where the arrays decide it (``exact``: elementwise, the observed gradient has
    the policy's bits; ``got`` and ``want``: the elements that differ): True where they are the
    same bits, False where the policy claims an order or the elements that differ are off by
    more than every contribution the windows could route there allows (the policy's own bound is
    no larger); None where the policy's routing decides."""
    if exact.all():
        return True
    if accumulate is not None:
        return False
    reads, reach = case.derived(("reach", every_tap), lambda: _reach(case, every_tap))
    return None if _within(case, split, reads[~exact], reach[~exact], got, want) else False


def _within(case, split: bool, count, size, got, want) -> bool:
    """Whether each of ``got`` lies within the bound of any order of additions of ``want``'s
    ``count`` contributions whose sizes sum to ``size``. The bound grows with ``count`` and
    ``size`` (every operation rounds monotonically), so larger ones only admit more."""
    # A split window's share g / k is itself a rounded term where a kernel computes it in the
    # dtype (g * (1 / k), the reciprocal rounded first): one more rounding per contribution.
    terms = count if split else np.maximum(count - 1, 0)
    bound = terms * float(ml_dtypes.finfo(case.x.dtype).eps) * size + ulp_of(want, case.x.dtype)
    a, e = as_f64(got), as_f64(want)
    with np.errstate(invalid="ignore"):
        return bool(((count > (0 if split else 1)) & np.isfinite(a) & np.isfinite(e) & (np.abs(a - e) <= bound)).all())


def _routed(case, policy) -> tuple[np.ndarray, np.ndarray]:
    """Per input element: how many contributions ``policy`` routes there (the windows that
    reach it, for a policy that splits a window's gradient), and the sum of their sizes."""
    g = np.abs(np.asarray(case.grad_output))
    size = as_f64(policy.evaluate(case.spec, case.x, g).grad_input)
    # a split window gives each of its maxima a share: count the maxima as tie=all routes to them
    counting = dataclasses.replace(policy, tie="all") if policy.tie == "split" else policy
    count = as_f64(counting.evaluate(case.spec, case.x, np.ones_like(g)).grad_input)
    return count, size


def _reach(case, every_tap: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per input element, what no policy's routing exceeds: the windows that read it and the
    sum of their gradients' sizes in the dtype, widened by a quarter for a sum added in another
    order. ``every_tap``: each window read at all of its taps that lie in the input, its
    region's or not (a policy with padding takes every tap as a candidate)."""
    plan = plan_for(case.spec, case.x.shape)
    shape = plan.pad(case.x).shape
    g = np.abs(np.asarray(case.grad_output).astype(case.x.dtype).astype(np.float64))

    def routed(value):
        per_tap = [value if every_tap or valid is None else np.where(valid, value, 0.0) for _, valid in plan.taps]
        return as_f64(round_to(plan.unpad(scatter_taps(plan, shape, per_tap, F64)), case.x.dtype))
    return routed(np.ones_like(g)), routed(g) * 1.25
