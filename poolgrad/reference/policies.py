"""Tie and NaN policies of max-type ops (SPEC.md, "Policies"): their names, and ``select``, the
rule itself for one window.

tie — which of several equal maxima of a window is the output and receives the window's
upstream gradient:
  first  the first in row-major window order (the canonical spec)
  last   the last in row-major window order
  all    every maximum receives the full upstream gradient (the forward is first's)
  split  the upstream gradient is divided equally among the maxima (the forward is first's)
nan — what a NaN in a window means:
  propagate  NaN is the maximum (canonical); several NaNs tie among themselves
  ignore     NaNs are skipped as if absent; a window of only NaN/padding routes nothing
"""

import math

from .errors import SpecError

TIES = ("first", "last", "all", "split")
NANS = ("propagate", "ignore")
CANONICAL = {"tie": "first", "nan": "propagate"}


def check(tie: str, nan: str) -> None:
    if tie not in TIES:
        raise SpecError("tie", f"unknown tie policy {tie!r}; allowed: {', '.join(TIES)}")
    if nan not in NANS:
        raise SpecError("nan", f"unknown NaN policy {nan!r}; allowed: {', '.join(NANS)}")


def select(values, tie: str = "first", nan: str = "propagate") -> tuple[float, list[int]]:
    """One window's selection from its real elements in window order: ``(y, receivers)``, the
    output (the selected element itself: its sign of zero, its NaN) and the indices of the
    elements that receive the window's gradient. The maxima are the window's NaNs if it has any
    (nan = propagate), else the elements equal to its largest (signed zeros are equal); with no
    candidate (no real element, or only NaN under ignore) ``y`` is -inf and nothing is routed."""
    check(tie, nan)
    candidates = [i for i, v in enumerate(values) if not (nan == "ignore" and math.isnan(v))]
    if not candidates:
        return -math.inf, []
    maxima = [i for i in candidates if math.isnan(values[i])]
    if not maxima:
        top = max(values[i] for i in candidates)
        maxima = [i for i in candidates if values[i] == top]
    chosen = maxima[-1] if tie == "last" else maxima[0]
    return values[chosen], maxima if tie in ("all", "split") else [chosen]
