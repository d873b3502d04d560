"""Tie and NaN policies of max-type backward passes (see SPEC.md, "Policies").

tie — which of several equal maxima of a window receives the window's upstream gradient:
  first  the first in row-major window order (numpy.argmax; the canonical spec)
  last   the last in row-major window order
  all    every tied maximum receives the full upstream gradient (the seeds' mask answer)
  split  the upstream gradient is divided equally among the tied maxima
nan — what a NaN in a window means:
  propagate  NaN is the maximum (IEEE maximum; canonical); several NaNs tie among themselves
  ignore     NaNs are skipped as if absent; a window of only NaN/padding routes nothing
"""

from .errors import SpecError

TIES = ("first", "last", "all", "split")
NANS = ("propagate", "ignore")
CANONICAL = {"tie": "first", "nan": "propagate"}


def check(tie: str, nan: str) -> None:
    if tie not in TIES:
        raise SpecError("tie", f"unknown tie policy {tie!r}; allowed: {', '.join(TIES)}")
    if nan not in NANS:
        raise SpecError("nan", f"unknown NaN policy {nan!r}; allowed: {', '.join(NANS)}")
