"""The AD modes in a run: which (case, target) pairs they check, and their batched calls.

By default the modes run where they can differ from the reverse mode: max-type ops (a
selection the modes could make differently; avg and lp have none) of the value families with
ties, NaN, infinities and signed zeros (placed in every geometry row of their op, padded rows
included), in float32, on the paths each framework's record names for the mode (its eager path
and one compiled path where the compiler can differentiate that way); which keeps their cost small next to the catalogue. ``--ad-modes all`` runs them on every case
and target, ``none`` not at all.
"""

from __future__ import annotations

from poolgrad.adapters import registry
from poolgrad.verdicts.ad_modes import MODES, direction

from .runner import GroupRunner

FAMILIES = ("ties_window", "ties_overlap", "ties_border", "inf_ties", "all_neginf", "nan", "signed_zero")
CHOICES = ("default", "all", "none")


def selected(cases, targets, choice: str, mode: str) -> list[tuple]:
    """(case, target) pairs AD mode ``mode`` checks."""
    if mode not in MODES:
        raise ValueError(f"unknown AD mode {mode!r}; known: {', '.join(MODES)}")
    if choice == "none":
        return []
    return [(c, t) for c in cases for t in targets
            if choice == "all" or (c.spec.is_max and c.family in FAMILIES and c.spec.dtype == "float32"
                                   and t.variant in _variants(t.framework, mode))]


def _variants(framework: str, mode: str) -> tuple[str, ...]:
    """The variants of ``framework`` that run ``mode`` by default (its record's ``ad_modes``)."""
    try:
        return registry.get(framework).ad_modes.get(mode, ())
    except KeyError:
        return ()


class ModeRunner(GroupRunner):
    """GroupRunner for one AD mode: each group is one call of the adapter's mode method, with
    every case's own direction (verdicts.ad_modes.direction) stacked like its input."""

    def __init__(self, pool, mode: str, **kw):
        if mode not in MODES:
            raise ValueError(f"unknown AD mode {mode!r}; known: {', '.join(MODES)}")
        self.mode = mode
        super().__init__(pool, **kw)

    def _run(self, call):
        return self.pool.run_group(call.target, call.cases[0].spec, [m.input for m in call.cases],
                                   [m.grad_output for m in call.cases], self.timeout_s, method=self.mode,
                                   extras=[(direction(m.spec, m.input),) for m in call.cases])
