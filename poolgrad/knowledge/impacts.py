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


def at_least(impact: str | None, arrays: list[tuple]) -> str | None:
    """A result's impact: its findings' worst (``impact``; None where one states none), never
    milder than its arrays show. ``arrays``: (observed, expected) pairs; where a NaN or an
    infinity (of either sign) stands in one and not the other, whatever claim explains it, the result is at least
    nan_semantics (a tie-order claim explains no vanished NaN, a rounding one no overflow)."""
    if impact is None or IMPACT_RANK[impact] >= IMPACT_RANK["nan_semantics"]:
        return impact
    for got, want in arrays:
        if got is not None and want is not None and np.shape(got) == np.shape(want) and any(
                (test(np.asarray(got, np.float64)) != test(np.asarray(want, np.float64))).any()
                for test in (np.isnan, np.isposinf, np.isneginf)):
            return "nan_semantics"
    return impact
