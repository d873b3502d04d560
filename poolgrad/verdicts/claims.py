"""The questions a check asks of one outcome besides its verdict, answered by the verdict engine:
which of its arrays are the reference's (the record names them), and for the knowledge base
(poolgrad/knowledge/judge.py) whether the outcome is the reference's result under a claim's
(partial) policies and whether it differs from the reference by no more than rounding."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import ad_modes, tolerances
from .case import CaseReference
from .classify import close
from .compare import identical, within
from .extended_policies import Policy
from .sums import routes_as


def as_expected(ref: CaseReference, outcome) -> list[str]:
    """The names of ``outcome``'s arrays that are the reference's (the same values and signs of
    zero; a NaN is a NaN, whatever its payload: they are written the same)."""
    return [name for name, want in (("forward", ref.expected_forward), ("grad_input", ref.expected_grad_input))
            if _same_bytes(getattr(outcome, name), want) or identical(getattr(outcome, name), want)]


def _same_bytes(got, want) -> bool:
    """The same bytes (most outcomes' arrays are the reference's: no elementwise comparison)."""
    return got is not None and got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def holds(ref: CaseReference, outcome, mode: str, forward: dict, gradient: dict) -> bool:
    """Whether ``outcome`` (one that ran) is the reference's result under the (partial) policies
    ``forward`` and ``gradient``, in ``mode`` ("backward" or an AD mode)."""
    fp, gp = Policy(**forward), Policy(**gradient)
    if not ref.spec.is_max:  # avg/lp: within the op's tolerance, as the policy search matches them
        return mode == "backward" and all(
            got is not None and np.shape(got) == want.shape and bool(close(ref, side, got, want).all())
            for side, got, want in (
                (0, outcome.forward, ref.result(fp).forward), (1, outcome.grad_input, ref.result(gp).grad_input)))
    # The observed arrays as each claim compares them (Policy.compared: a zero's sign left open).
    if mode != "backward":  # forward: the mode's policy, gradient: the reverse mode's (Finding.in_mode)
        return (identical(fp.compared(ad_modes.policy_jvp(ref, fp)), fp.compared(ad_modes.derivative(mode, outcome)))
                and identical(ref.result(gp).grad_input, gp.compared(outcome.grad_input)))
    # A claim's routing holds whatever order the sums took, unless it claims the order
    # (accumulate): then bit for bit (verdicts/sums.py).
    return identical(ref.result(fp).forward, fp.compared(outcome.forward)) and routes_as(ref, gp, gp.compared(outcome.grad_input))


def rounding_only(ref: CaseReference, outcome) -> bool:
    """avg/lp: whether ``outcome``'s arrays differ from the reference's by no more than rounding
    can make of them: the same infinities and NaNs, and every other element within the op's
    tolerance in a lower precision (float32 for float64 results, bfloat16, the coarsest kernels
    compute in, for the others)."""
    coarse = np.dtype(np.float32) if ref.x.dtype == np.float64 else np.dtype(ml_dtypes.bfloat16)
    for side, (got, want) in enumerate(((outcome.forward, ref.expected_forward), (outcome.grad_input, ref.expected_grad_input))):
        if got is None or np.shape(got) != want.shape:
            return False
        scale = np.maximum(np.abs(want.astype(np.float64)), np.abs(ref.magnitude()[side].astype(np.float64)))
        if not within(got, want, tolerances.bound(ref.spec.op, coarse, scale)).all():
            return False
    return True
