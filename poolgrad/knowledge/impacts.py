"""What a behaviour means for training, from harmless to worst: ``--fail-on IMPACT`` fails the
results that findings explain with an impact at or above IMPACT."""

IMPACTS = {
    "valid_subgradient": "a tie choice only: still a valid subgradient",
    "rounding": "sums rounded in low precision or in another order: small numeric differences",
    "nan_semantics": "a NaN appears or vanishes, or an infinity is handled otherwise",
    "gradient_lost": "a window routes nothing, or less than its upstream gradient",
    "gradient_misrouted": "gradient lands outside its window, or in another sample or channel",
    "wrong_forward": "the forward value is wrong",
    "error": "the call raises where the spec has a result",
    "crash": "the process dies or hangs",
}
IMPACT_RANK = {name: i for i, name in enumerate(IMPACTS)}  # harmless to worst
