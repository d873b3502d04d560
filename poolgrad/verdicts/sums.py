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

from .compare import as_f64, same_bits, ulp_of

ANY_ORDER = "any"  # the accumulate value a verdict's policy names for sums in another order


def routes_as(case, policy, grad_input) -> bool:
    """Whether ``grad_input`` routes as ``policy`` on ``case`` (a verdicts.case.CaseReference), its
    sums in any order. A policy that claims an order (accumulate) is matched bit for bit."""
    want = case.result(policy).grad_input
    if np.shape(grad_input) != want.shape:
        return False
    exact = same_bits(grad_input, want)
    if exact.all():
        return True
    if policy.accumulate is not None:
        return False
    count, size = case.derived(("routed", policy), lambda: _routed(case, policy))
    # A split window's share g / k is itself a rounded term where a kernel computes it in the
    # dtype (g * (1 / k), the reciprocal rounded first): one more rounding per contribution.
    split = policy.tie == "split"
    terms = count if split else np.maximum(count - 1, 0)
    bound = terms * float(ml_dtypes.finfo(case.x.dtype).eps) * size + ulp_of(want, case.x.dtype)
    a, e = as_f64(grad_input), as_f64(want)
    with np.errstate(invalid="ignore"):
        close = (count > (0 if split else 1)) & np.isfinite(a) & np.isfinite(e) & (np.abs(a - e) <= bound)
    return bool((exact | close).all())


def _routed(case, policy) -> tuple[np.ndarray, np.ndarray]:
    """Per input element: how many contributions ``policy`` routes there (the windows that
    reach it, for a policy that splits a window's gradient), and the sum of their sizes."""
    g = np.abs(np.asarray(case.grad_output))
    size = as_f64(policy.evaluate(case.spec, case.x, g).grad_input)
    # a split window gives each of its maxima a share: count the maxima as tie=all routes to them
    counting = dataclasses.replace(policy, tie="all") if policy.tie == "split" else policy
    count = as_f64(counting.evaluate(case.spec, case.x, np.ones_like(g)).grad_input)
    return count, size
