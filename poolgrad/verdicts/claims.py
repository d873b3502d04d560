"""The questions a check asks of one outcome besides its verdict, answered by the verdict engine
for the knowledge base (poolgrad/knowledge/judge.py): whether the outcome is the reference's
result under a claim's (partial) policies, and whether it differs from the reference by no more
than rounding. ``observed``: the outcome's arrays against its case's reference
(verdicts.observed.Observed)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import ad_modes, tolerances
from .compare import identical, within
from .extended_policies import Policy
from .sums import routes_as


def checkable(spec, mode: str) -> bool:
    """Whether a policy claim can be checked on a result of ``spec`` in ``mode``: in the reverse
    mode, and in the AD modes of a selection (max-type ops); the spec has no AD mode of avg's or
    lp's policies (an order of sums, a dtype to sum in)."""
    return mode == "backward" or spec.is_max


def holds(observed, mode: str, forward: dict, gradient: dict) -> bool:
    """Whether the outcome (one that ran) is the reference's result under the (partial) policies
    ``forward`` and ``gradient``, in ``mode`` ("backward" or an AD mode)."""
    ref, fp, gp = observed.reference, Policy(**forward), Policy(**gradient)
    if not ref.spec.is_max:  # avg/lp: within the op's tolerance, as the policy search matches them
        return checkable(ref.spec, mode) and not observed.shape_error and all(
            observed.close(side, p).all() for side, p in ((0, fp), (1, gp)))
    # The observed arrays as each claim compares them (Policy.compared: a zero's sign left open).
    if mode != "backward":  # forward: the mode's policy, gradient: the reverse mode's (Finding.in_mode)
        return (identical(fp.compared(ad_modes.policy_jvp(ref, fp)),
                          fp.compared(ad_modes.derivative(mode, observed.outcome)))
                and observed.compared_by(gp).same_as(1, ref.result(gp).grad_input))
    # A claim's routing holds whatever order the sums took, unless it claims the order
    # (accumulate): then bit for bit (verdicts/sums.py).
    return observed.compared_by(fp).same_as(0, ref.result(fp).forward) and routes_as(observed.compared_by(gp), gp)


def rounding_only(observed) -> bool:
    """avg/lp: whether the outcome's arrays differ from the reference's by no more than rounding
    can make of them: the same infinities and NaNs, and every other element within the op's
    tolerance in a lower precision (float32 for float64 results, bfloat16, the coarsest kernels
    compute in, for the others)."""
    ref = observed.reference
    if observed.shape_error:
        return False
    coarse = np.dtype(np.float32) if ref.x.dtype == np.float64 else np.dtype(ml_dtypes.bfloat16)
    for side, want in enumerate(observed.expected):
        scale = np.maximum(np.abs(want.astype(np.float64)), np.abs(ref.magnitude()[side].astype(np.float64)))
        if not within(observed.wide[side], want, tolerances.bound(ref.spec.op, coarse, scale)).all():
            return False
    return True
