"""What a behaviour means for training, from harmless to worst: ``--fail-on IMPACT`` fails the
results that findings explain with an impact at or above IMPACT."""

import numpy as np

IMPACTS = {
    "valid_subgradient": "a tie choice only: still a valid subgradient",
    "rounding": "sums rounded in low precision or in another order: small numeric differences",
    "nan_semantics": "a NaN or an infinity appears, vanishes or is handled otherwise (a sum that overflows, a NaN skipped)",
    "gradient_lost": "a window routes nothing, or less than its upstream gradient",
    "gradient_misrouted": "gradient lands outside its window, or in another sample or channel",
    "wrong_forward": "the forward value is wrong",
    "error": "the call raises where the spec has a result",
    "crash": "the process dies or hangs",
}
IMPACT_RANK = {name: i for i, name in enumerate(IMPACTS)}  # harmless to worst


# What a result that did not return arrays is at least, by its verdict.
VERDICT_FLOOR = {"error": "error", "crash": "crash", "timeout": "crash"}


def at_least(impact: str | None, arrays: list[tuple], verdict: str = "") -> str | None:
    """A result's impact: its findings' worst (``impact``; None where one states none), never
    milder than its arrays show, nor than what happened to the call (``verdict``: a call that
    raised is at least an error, one that died or hung a crash, whatever claim explains it: an
    undefined call's finding states what it usually does). ``arrays``: (observed, expected)
    pairs; where a NaN or an infinity (of either sign) stands in one and not the other, whatever
    claim explains it, the result is at least nan_semantics (a tie-order claim explains no
    vanished NaN, a rounding one no overflow)."""
    if impact is None:
        return impact
    floor = VERDICT_FLOOR.get(verdict)
    if floor is not None:
        return max(impact, floor, key=IMPACT_RANK.get)
    if IMPACT_RANK[impact] >= IMPACT_RANK["nan_semantics"]:
        return impact
    for got, want in arrays:
        if got is not None and want is not None and np.shape(got) == np.shape(want) and any(
                (test(np.asarray(got, np.float64)) != test(np.asarray(want, np.float64))).any()
                for test in (np.isnan, np.isposinf, np.isneginf)):
            return "nan_semantics"
    return impact
