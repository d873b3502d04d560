"""Verdicts on the AD modes: forward mode (jvp) and second order (double_backward).

Each mode's derivative is compared with the reference (reference.jvp / double_backward) and,
for max-type ops, explained by the same policy search as the reverse mode: the candidates of
verdicts.case in their order, each evaluated in forward mode (Policy.jvp). The reverse-mode
gradient of the same call is explained by verdicts.explain. Cross-mode check: with tangent
``t`` and the case's grad_output ``u``, ``<jvp(t), u> == <t, vjp(u)>`` (for double backward
the derivative by grad_output plays jvp(v)); where it fails the two modes selected different
elements, and the verdict ``inconsistent_modes`` names both policies. avg and lp are judged
by tolerance, as in the reverse mode (their modes share no selection to disagree on).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from poolgrad import reference
from poolgrad.reference.probes import routing_probe
from poolgrad.reference import CANONICAL

from . import tolerances
from .case import CaseReference
from .compare import differing_cells, errors, identical, identical_to, same_bits, within
from .explain import explain
from .observed import Observed
from .verdict import Verdict

MODES = ("jvp", "double_backward")
# The array a mode's policy is read from, and the adapter method that produces it.
DERIVATIVE = {"jvp": "tangent_output", "double_backward": "grad_grad_output"}


def direction(spec, x: np.ndarray) -> np.ndarray:
    """The tangent (jvp) or v (double backward) of a case: a routing probe over the input, so
    the output tangent of a window is the probe value of the element it selected (distinct
    within a window along the last axis) and every sum of them is exact in the dtype."""
    taps = math.prod(a.taps for a in reference.resolve(spec, x.shape).axes)
    return routing_probe(x.shape, spec.dtype or x.dtype.name, taps)


def derivative(mode: str, outcome):
    """The outcome's array that the mode's policy is read from."""
    return getattr(outcome, DERIVATIVE[mode])


def expected(mode: str, spec, x, grad_output, *, reference: CaseReference | None = None) -> np.ndarray:
    """The reference's (canonical) value of that array (``reference`` as in classify_mode)."""
    return _reference(mode, reference if reference is not None else CaseReference(spec, x, grad_output))[0]


def _direction(case) -> np.ndarray:
    return case.derived("direction", lambda: direction(case.spec, case.x))


def _reference(mode: str, case) -> tuple:
    """(the mode's derivative, the derivative by the input or None) under the canonical policy."""
    def compute():
        t = _direction(case)
        if mode == "jvp":
            return reference.jvp(case.spec, case.x, t), None
        return reference.double_backward(case.spec, case.x, case.grad_output, t)
    return case.derived(("reference", mode), compute)


def policy_jvp(case, policy) -> np.ndarray:
    """``policy``'s forward mode along the case's direction."""
    return case.derived(("jvp", policy), lambda: policy.jvp(case.spec, case.x, _direction(case)))


def _bits(a: np.ndarray) -> tuple:
    return a.dtype.str, a.shape, a.tobytes()


def dot(a, b) -> float:
    """<a, b> over the finite products (a window with no real element carries no tangent)."""
    prod = np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)
    return math.fsum(prod[np.isfinite(prod)].ravel())


def classify_mode(mode: str, spec, x, grad_output, outcome, *, reference: CaseReference | None = None) -> Verdict:
    """The verdict on an outcome of adapter method ``mode`` for the case (spec, x, grad_output)
    (``reference`` as in classify)."""
    if not outcome.ran:
        return Verdict(outcome.status, message=outcome.message or outcome.status)
    case = reference if reference is not None else CaseReference(spec, x, grad_output)
    t = _direction(case)
    derivative = getattr(outcome, DERIVATIVE[mode])
    want, want_x = _reference(mode, case)
    checks = [(DERIVATIVE[mode], derivative, want.shape), ("grad_input", outcome.grad_input, x.shape)]
    if want_x is not None:
        checks.append(("grad_grad_input", outcome.grad_grad_input, x.shape))
    for name, got, shape in checks:
        if got is None or np.shape(got) != shape:
            return Verdict("wrong", message=f"{name} has shape {np.shape(got) if got is not None else None}, "
                                            f"expected {shape}")
    if not spec.is_max:
        return _arithmetic(mode, spec, x, grad_output, t, derivative, want, outcome.grad_grad_input, want_x)
    if want_x is not None and not same_bits(outcome.grad_grad_input, want_x).all():
        return _wrong("grad_grad_input", outcome.grad_grad_input, want_x, x.dtype,
                      "a selection is constant almost everywhere: its derivative by the input is 0")
    return _max_type(mode, case, t, derivative, want, outcome)


def _fmt(policy) -> str:
    return ", ".join(f"{k}={v}" for k, v in policy.as_dict().items())


def _wrong(name, got, want, dtype, why) -> Verdict:
    ok = same_bits(got, want)
    abs_err, ulp_err = errors(got, want, dtype)
    return Verdict("wrong", message=f"{name} differs from the reference in {int((~ok).sum())} cell(s); {why}",
                   max_abs_error=float(abs_err.max(initial=0.0)), max_ulp_error=float(ulp_err.max(initial=0.0)),
                   differing_in=name, differing_cells=differing_cells(ok), differing_count=int((~ok).sum()))


def _max_type(mode, case, t, derivative, want, outcome) -> Verdict:
    x, grad_output = case.x, case.grad_output
    # The same search as the reverse mode, each candidate evaluated in forward mode; both
    # searches depend on the arrays alone, so targets with the same arrays share them.
    def mode_search():
        same = identical_to(derivative)
        return next((p for p in case.candidates() if same(policy_jvp(case, p))), None)
    mode_policy = case.derived(("mode policy", _bits(derivative)), mode_search)
    observed = Observed(case, outcome if outcome.forward is not None else
                        dataclasses.replace(outcome, forward=case.expected_forward))
    reverse = case.derived(("reverse policy", observed.fingerprint), lambda: explain(observed).backward)
    # Overlapping windows' gradients summed where the sum is no number of the dtype round the
    # right-hand side whatever the selection: an explained reverse mode selects like the mode
    # when its own forward mode gives the mode's derivative.
    consistent = (dot(derivative, grad_output) == dot(t, outcome.grad_input)
                  or (reverse is not None and identical(policy_jvp(case, reverse), derivative)))
    name = DERIVATIVE[mode]
    if not consistent:
        return Verdict("inconsistent_modes",
                       policy=mode_policy and mode_policy.as_dict(), forward_policy=reverse and reverse.as_dict(),
                       message=f"<{name}, grad_output> != <direction, grad_input>: {mode} follows "
                               f"{_fmt(mode_policy) if mode_policy else 'no policy'}, the reverse mode of the same "
                               f"call {_fmt(reverse) if reverse else 'no policy'}")
    if mode_policy is None:
        return _wrong(name, derivative, want, x.dtype, "no policy explains it")
    if mode_policy.as_dict() == CANONICAL:
        return Verdict("conforms", policy=dict(CANONICAL), max_abs_error=0.0, max_ulp_error=0.0,
                       message=f"{name} is the canonical result, consistent with the reverse mode")
    return Verdict("policy", policy=mode_policy.as_dict(), forward_policy=reverse and reverse.as_dict(),
                   message=f"{name} explained by policy {_fmt(mode_policy)}, consistent with the reverse mode")


def _arithmetic(mode, spec, x, grad_output, t, derivative, want, by_x, want_x) -> Verdict:
    """Within the op's tolerance, the scale being the size of the terms summed
    (reference.ad_modes.error_scale), as the reverse mode's cancellation rule; any value where
    a product of the formula's factors is past the dtype's range (reference.ad_modes.overflows)."""
    scales = reference.ad_modes.error_scale(mode, spec, x, grad_output, t)
    past_range = reference.ad_modes.overflows(mode, spec, x, grad_output, t)
    pairs = [(DERIVATIVE[mode], derivative, want)] + ([("grad_grad_input", by_x, want_x)] if want_x is not None else [])
    worst = 0.0
    for (name, got, expected), scale, anything in zip(pairs, scales, past_range):
        mag = np.maximum(np.abs(expected.astype(np.float64)), np.abs(scale.astype(np.float64)))
        ok = within(got, expected, tolerances.bound(spec.op, x.dtype, mag)) | anything
        if not ok.all():
            return _wrong(name, got, expected, x.dtype, f"outside the {spec.op} tolerance")
        worst = max(worst, float(errors(got, expected, x.dtype)[1][~anything].max(initial=0.0)))
    unchecked = sum(int(a.sum()) for a in past_range)
    beyond = f"; {unchecked} element(s) past {x.dtype.name}'s range not checked" if unchecked else ""
    return Verdict("conforms", max_ulp_error=worst,
                   message=f"within the {spec.op} tolerance for {x.dtype.name} (max {worst:.3g} ulp){beyond}")
