"""The reference of a case, as the verdict engine reads it: canonical results computed once,
policy results computed on demand and kept, shared by every target's outcome of the same case
(the suite's batching group holds them: poolgrad/suite/call.py, Group.reference).

The cases of one framework call (one spec, one shape past N) are stacked along N, and the
reference's results, each policy's results and the magnitudes are computed once for the
stack: the reference works window by window, so a case's rows of a stacked result are its own
result bit for bit, and small arrays cost per numpy call, not per element (ten cases of a
call cost about what one does). What depends on a case as a whole stays per case: its
candidate policies and their order (features of its own values), its verdicts, the AD modes'
derived arrays.

A policy is evaluated on the rows of the cases that are likely to ask for it, not the whole
stack: the first case that asks brings its *kin* along (the cases of its value family, whose
targets diverge alike: ten draws of "ties_overlap" ask for the same policies, while the
call's random draws conform and ask for none). Most evaluated rows were never asked for
where a call held ten cases of each family, and an evaluation costs per row at that size.
"""

from __future__ import annotations

import numpy as np

from poolgrad import reference
from poolgrad.reference.api import range_error

from .extended_policies import Policy, Result, candidates, features

# Input elements per stack at most: past that a numpy call's overhead is already amortised,
# and a stack holds every policy result it computed.
STACK_ELEMENTS = 1 << 16


class Stack:
    """Cases of one spec and one shape past N, stacked along N. ``kins``: each case's kin
    (None: one kin, the whole stack)."""

    def __init__(self, spec, xs: list[np.ndarray], gs: list, kins=None):
        self.spec = spec
        self.x = np.concatenate(xs) if len(xs) > 1 else xs[0]
        self.grad_output = np.concatenate([np.asarray(g) for g in gs]) if len(gs) > 1 else gs[0]
        self.expected_forward = reference.forward(spec, self.x)
        self.expected_grad_input = reference.backward(spec, self.x, self.grad_output)
        self._spans: dict = {}  # kin -> its cases' rows, (start, stop) each
        start = 0
        for kin, x in zip(kins or [None] * len(xs), xs):
            self._spans.setdefault(kin, []).append((start, start + len(x)))
            start += len(x)
        self._parts: dict = {}  # kin -> (its rows' x, grad_output, {a case's start: its start there})
        self._results: dict[tuple, Result] = {}
        self._selections: dict = {}  # kin -> the policies' selections on its part (Policy.evaluate)
        self._valid: dict[tuple, np.ndarray] = {}
        self._magnitude = None

    def part(self, kin) -> tuple:
        if kin not in self._parts:
            spans = self._spans[kin]
            if len(self._spans) == 1:
                self._parts[kin] = (self.x, self.grad_output, {a: a for a, _ in spans})
            else:
                offsets, at = {}, 0
                for a, b in spans:
                    offsets[a], at = at, at + b - a
                self._parts[kin] = (np.concatenate([self.x[a:b] for a, b in spans]),
                                    np.concatenate([np.asarray(self.grad_output[a:b]) for a, b in spans]), offsets)
        return self._parts[kin]

    def result(self, policy: Policy, kin=None) -> Result:
        """``policy``'s results on the rows of ``kin``'s cases (in kin's ``part``)."""
        if (policy, kin) not in self._results:
            x, g, _ = self.part(kin)
            self._results[policy, kin] = policy.evaluate(self.spec, x, g, self._selections.setdefault(kin, {}))
        return self._results[policy, kin]

    def valid(self, policy: Policy, kin=None) -> np.ndarray:
        """Per sample of ``kin``'s part: whether ``policy``'s routing is a valid subgradient."""
        if (policy, kin) not in self._valid:
            self._valid[policy, kin] = self.result(policy, kin).valid()
        return self._valid[policy, kin]

    def magnitude(self) -> tuple[np.ndarray, np.ndarray]:
        if self._magnitude is None:
            self._magnitude = reference.error_scale(self.spec, self.x, self.grad_output)
        return self._magnitude


class CaseReference:
    """What the reference says of one case: its expected results, its candidate policies and
    their results, the AD modes' derived arrays."""

    def __init__(self, spec, x: np.ndarray, grad_output: np.ndarray, stack: Stack | None = None,
                 rows: slice | None = None, kin=None):
        """``stack``, ``rows`` and ``kin``: the stack holding this case, its rows there and its
        kin (by default a stack of this case alone)."""
        self.spec, self.x, self.grad_output = spec, x, grad_output
        self._stack = stack if stack is not None else Stack(spec, [x], [grad_output])
        self._rows = rows if rows is not None else slice(0, len(x))
        self._kin = kin
        # A RoI case is its stack's only one, and its output's rows are its boxes, not its planes.
        self._out = slice(None) if spec.is_roi else self._rows
        self.expected_forward = self._stack.expected_forward[self._out]
        self.expected_grad_input = self._stack.expected_grad_input[self._rows]
        self.verdicts: dict = {}  # outcome fingerprint -> Verdict fields (identical outcomes recur)
        self._results: dict[Policy, Result] = {}
        self._candidates: tuple[Policy, ...] | None = None
        self._derived: dict = {}

    def result(self, policy: Policy) -> Result:
        if policy not in self._results:
            stack, kin = self._stack, self._kin
            at = stack.part(kin)[2][self._rows.start]
            rows = slice(at, at + self._rows.stop - self._rows.start)
            out = slice(None) if self.spec.is_roi else rows
            r = stack.result(policy, kin)
            self._results[policy] = Result(r.forward[out], r.grad_input[rows],
                                           lambda: bool(stack.valid(policy, kin)[out].all()))
        return self._results[policy]

    def candidates(self) -> tuple[Policy, ...]:
        if self._candidates is None:
            self._candidates = candidates(features(self.spec, self.x, self.grad_output))
        return self._candidates

    def derived(self, key, compute):
        """``compute()``, once per case and ``key``: what every target's verdict in an AD mode
        needs (the direction, the reference's derivative, a policy's JVP). Shared: read only."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]

    def range_error(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """lp: reference.api.range_error of the case (computed once)."""
        return self.derived("range_error", lambda: range_error(self.spec, self.x, self.grad_output))

    def magnitude(self) -> tuple[np.ndarray, np.ndarray]:
        """avg/lp: the size each forward output's and gradient element's error may have in a
        computation as accurate as the dtype allows (reference.error_scale: the terms summed,
        and lp's conditioning), so a tolerance is fooled neither by cancellation inside a
        window nor by a formula that amplifies it."""
        forward, gradient = self._stack.magnitude()
        return forward[self._out], gradient[self._rows]


def stacked(members: list[tuple]) -> dict:
    """The references of ``members`` ((spec, x, grad_output, key, kin) of one spec and layout),
    their work done on one Stack; by key. The stack does not hold them: a reference dropped frees
    its stack by reference counting, not by the cyclic collector's passes."""
    kins = [m[4] if len(m) > 4 else None for m in members]
    stack = Stack(members[0][0], [m[1] for m in members], [m[2] for m in members], kins)
    references, start = {}, 0
    for (spec, x, g, k, *_), kin in zip(members, kins):
        references[k] = CaseReference(spec, x, g, stack, slice(start, start + len(x)), kin)
        start += len(x)
    return references
