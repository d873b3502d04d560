"""One outcome's forward and gradient against its case's reference, compared once.

The verdict engine asks an outcome's arrays the same questions over and over: whether they are
the reference's bit for bit and where not, how far off they are, whether they lie within the
op's tolerance, whether they are a candidate policy's result. ``Observed`` holds the two arrays
beside the reference's and answers each question once (cached attributes), so classify,
explain, sums and the claims read its answers instead of comparing the arrays again."""

from __future__ import annotations

import dataclasses
import functools

import ml_dtypes
import numpy as np

from poolgrad.reference.geometry import resolve, window_volume

from . import tolerances
from .case import CaseReference
from .compare import as_f64, differing_cells, errors, identical_to, same_bits, within
from .extended_policies import Policy

SIDES = ("forward", "grad_input")  # side 0 and side 1 of every question


class Observed:
    """``outcome``'s forward and gradient (an adapters.base.Outcome) observed on the case of
    ``reference``."""

    def __init__(self, reference: CaseReference, outcome):
        self.reference, self.outcome = reference, outcome
        self.arrays = (outcome.forward, outcome.grad_input)
        self.expected = (reference.expected_forward, reference.expected_grad_input)
        self._close: dict[tuple, np.ndarray] = {}  # (side, policy) -> close()
        self._unsigned: Observed | None = None  # compared_by a policy that leaves a zero's sign open

    @functools.cached_property
    def shape_error(self) -> str | None:
        """Why the arrays cannot be compared with the reference's (one missing, or another
        shape), or None."""
        for name, got, want in zip(SIDES, self.arrays, self.expected):
            if got is None or np.shape(got) != want.shape:
                return f"{name} has shape {np.shape(got) if got is not None else None}, expected {want.shape}"
        return None

    @functools.cached_property
    def fingerprint(self) -> tuple:
        """The arrays' bits: outcomes with these arrays get the same answers."""
        return tuple(None if a is None else (a.dtype.str, a.shape, a.tobytes()) for a in self.arrays)

    @functools.cached_property
    def _same(self) -> tuple:
        return tuple(identical_to(a) for a in self.arrays)

    def same_as(self, side: int, want) -> bool:
        """Whether side ``side`` is ``want`` bit for bit (compare.identical)."""
        return self._same[side](want)

    def same_bits(self, side: int, want) -> np.ndarray:
        """Elementwise: side ``side`` and ``want`` have the same bits (compare.same_bits)."""
        return same_bits(self.arrays[side], want)

    @functools.cached_property
    def exact(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side, elementwise: the reference's bits."""
        return self.same_bits(0, self.expected[0]), self.same_bits(1, self.expected[1])

    @functools.cached_property
    def as_expected(self) -> list[str]:
        """The names of the arrays that are the reference's (the same values and signs of zero;
        a NaN is a NaN, whatever its payload: they are written the same)."""
        return [name for side, name in enumerate(SIDES) if self.same_as(side, self.expected[side])]

    @functools.cached_property
    def wide(self) -> list[np.ndarray]:
        """The arrays in float64, where every case dtype widens exactly."""
        return [as_f64(a) for a in self.arrays]

    def _errors(self, side: int) -> tuple[np.ndarray, np.ndarray]:
        return errors(self.wide[side], self.expected[side], self.reference.x.dtype, self.exact[side])

    def differences(self, ok_forward: np.ndarray, ok_gradient: np.ndarray) -> dict:
        """The error summary against the reference, located in the gradient where
        ``ok_gradient`` (elementwise: acceptable) fails, else in the forward."""
        side = 1 if not ok_gradient.all() else 0
        ok = (ok_forward, ok_gradient)[side]
        abs_err, ulp_err = self._errors(side)
        return {"max_abs_error": float(abs_err.max(initial=0.0)), "max_ulp_error": float(ulp_err.max(initial=0.0)),
                "differing_in": SIDES[side], "differing_cells": differing_cells(ok),
                "differing_count": int((~ok).sum())}

    def close(self, side: int, policy: Policy | None = None) -> np.ndarray:
        """Elementwise: side ``side`` within the op's tolerance of ``policy``'s result (None:
        the reference's), scaled by |want| or, where that fails, by the size of the terms
        summed, so cancellation inside a window (1e3 - 1e3 + 0.3) is not a failure; for lp also
        within what the dtype's range adds (powers in or below the subnormal range:
        reference.api.range_error), and where the dtype cannot resolve a window's power sum,
        anything a computation in the dtype can give there: a forward from 0 to the ceiling,
        or NaN; any gradient the window reaches."""
        if (side, policy) not in self._close:
            want = self.expected[side] if policy is None else getattr(self.reference.result(policy), SIDES[side])
            ok = self._within_tolerance(side, want)
            if policy is not None and policy.accumulate is not None and self.reference.spec.op.endswith("avg_pool"):
                ok = ok | (self._order_decides_overflow[side] & (~np.isfinite(self.wide[side]) | self.close(side)))
            self._close[side, policy] = ok
        return self._close[side, policy]

    @functools.cached_property
    def _order_decides_overflow(self) -> tuple[np.ndarray, np.ndarray]:
        """avg under a claim of sums kept in the dtype, per side: the elements whose terms'
        magnitudes add up past the dtype's largest value, where the order of the additions decides
        whether a partial sum overflows (SPEC.md, "accumulate"): there the claim takes inf or NaN,
        or the spec's value within the bound. A forward's terms are at most a window's volume times
        their mean magnitude."""
        case = self.reference
        largest = float(ml_dtypes.finfo(case.x.dtype).max)
        forward, gradient = (m.astype(np.float64) for m in case.magnitude())
        return forward * window_volume(resolve(case.spec, case.x.shape)) > largest, gradient > largest

    def _within_tolerance(self, side: int, want: np.ndarray) -> np.ndarray:
        case, got = self.reference, self.wide[side]
        op, dtype = case.spec.op, case.x.dtype
        ok = within(got, want, tolerances.bound(op, dtype, want))
        if ok.all():
            return ok
        scale = np.maximum(np.abs(want.astype(np.float64)), np.abs(case.magnitude()[side].astype(np.float64)))
        bound = tolerances.bound(op, dtype, scale)
        if op != "lp_pool":
            return within(got, want, bound)
        ranged = case.range_error()
        ok = within(got, want, bound + ranged[side])
        if side == 1:
            return ok | np.isinf(ranged[1])
        ceiling = ranged[2]
        with np.errstate(invalid="ignore"):
            return ok | (~np.isnan(ceiling) & (np.isnan(got) | ((got >= 0) & (got <= ceiling))))

    def compared_by(self, policy: Policy) -> "Observed":
        """The arrays as ``policy``'s claims compare them (Policy.compared: under zero_sign
        "any" every zero +0.0)."""
        if policy.zero_sign != "any":
            return self
        if self._unsigned is None:
            self._unsigned = Observed(self.reference, dataclasses.replace(
                self.outcome, forward=policy.compared(self.arrays[0]), grad_input=policy.compared(self.arrays[1])))
        return self._unsigned
