"""One (case, target) observation: what a target's call returned for a case, and everything the
check asks of it, each computed once and kept (``check`` reads it; the judge asks it its
questions, poolgrad/knowledge/judge.py):

- the verdict (the policy search's label: the arrays alone decide it), from the verdict engine;
- whether each claim's policies reproduce it, and whether it is off by no more than rounding;
- which of its arrays are the reference's, bit for bit (the record names them, as_expected);
- what the knowledge base scopes a finding by: the op, dtype and properties of the case and of
  the framework call it ran in.

The case's reference (poolgrad/verdicts/case.py) shares the answers that depend on the arrays
alone between the targets of a case whose arrays are the same (most conform)."""

from __future__ import annotations

import functools
import math

from poolgrad import verdicts
from poolgrad.adapters import registry
from poolgrad.adapters.base import OK, Outcome, Target
from poolgrad.json_values import encode_array
from poolgrad.verdicts import ad_modes, claims
from poolgrad.verdicts.observed import Observed

from .call import FrameworkCall, op_name

class Observation:
    """``outcomes``: the first run and its repeats; ``mode``: the derivative checked, "backward"
    or an AD mode (verdicts.ad_modes.MODES); ``call``: the framework call the case ran in (by
    default a call of the case alone)."""

    def __init__(self, case, target: Target, outcomes: list[Outcome], mode: str = "backward",
                 call: FrameworkCall | None = None):
        self.case, self.target, self.mode = case, target, mode
        self.call = FrameworkCall.alone(target, case) if call is None else call
        self.first, self.repeats = outcomes[0], outcomes[1:]
        self.op, self.dtype = op_name(case), case.spec.dtype  # asked by every finding of the target
        self._claims: dict[tuple, bool] = {}

    @functools.cached_property
    def reference(self):
        return self.call.reference(self.case)

    @functools.cached_property
    def observed(self) -> Observed:
        """The outcome's forward and gradient against the reference's, compared once."""
        return Observed(self.reference, self.first)

    @functools.cached_property
    def verdict(self) -> verdicts.Verdict:
        """The verdict and its policy, from the arrays alone (the policy search's canonical
        choice), whatever the knowledge base says: one behaviour, one label."""
        case, first = self.case, self.first
        if self.mode != "backward":
            return ad_modes.classify_mode(self.mode, case.spec, case.input, case.grad_output, first,
                                          reference=self.reference)
        fw = registry.FRAMEWORKS.get(self.target.framework)
        return verdicts.classify(self.observed, self.repeats,
                                 index_layout=fw.index_layouts.get(self.target.variant) if fw else None)

    @functools.cached_property
    def properties(self) -> frozenset[str]:
        return self.call.group.properties(self.case)

    @functools.cached_property
    def others(self) -> frozenset[str]:
        """The properties of the other cases of the framework call, for kernels that write across
        cases; a replayed record brings them along (call_properties)."""
        return frozenset(self.first.info.get("call_properties") or ()).union(self.call.others(self.case))

    @functools.cached_property
    def call_properties(self) -> frozenset[str]:
        """The properties of every case of the framework call, this one's included."""
        return self.properties | self.others

    @functools.cached_property
    def call_elements(self) -> int:
        """The input elements of the framework call the case ran in."""
        return math.prod(self.first.info.get("call_shape") or self.case.input.shape)

    @functools.cached_property
    def _bits(self) -> tuple:
        """The observed arrays' bits: targets whose arrays are these get the same answers."""
        derivative = None if self.mode == "backward" else ad_modes.derivative(self.mode, self.first)
        return *self.observed.fingerprint, derivative if derivative is None else (
            derivative.dtype.str, derivative.shape, derivative.tobytes())

    @property
    def policies_apply(self) -> bool:
        """Whether a policy claim can be checked here (claims.checkable): where not, it says nothing."""
        return claims.checkable(self.case.spec, self.mode)

    def holds(self, forward: dict, gradient: dict) -> bool:
        """Whether the outcome is the reference's result under the (partial) policies ``forward``
        and ``gradient`` (a claim's, or several claims' together)."""
        if self.first.status != OK:
            return False
        key = (tuple(sorted(forward.items())), tuple(sorted(gradient.items())))
        if key not in self._claims:
            self._claims[key] = self.reference.derived(
                ("holds", self.mode, self._bits, *key),
                lambda: claims.holds(self.observed, self.mode, forward, gradient))
        return self._claims[key]

    @functools.cached_property
    def rounding_only(self) -> bool:
        return claims.rounding_only(self.observed)

    def shows_no_more_than(self, impact: str | None) -> bool:
        """Whether the arrays are no worse than ``impact`` says: a result off by more than
        rounding is never credited to a rounding finding (a verdict claim checks nothing else)."""
        return (impact != "rounding" or self.case.spec.is_max or self.mode != "backward"
                or self.first.status != OK or self.rounding_only)

    @functools.cached_property
    def expected_derivative(self):
        """The reference's derivative in an AD mode (None in the reverse mode)."""
        if self.mode == "backward":
            return None
        case = self.case
        return ad_modes.expected(self.mode, case.spec, case.input, case.grad_output, reference=self.reference)

    @property
    def observed_and_expected(self) -> list[tuple]:
        """(observed, the reference's) of the forward and of the derivative checked."""
        if self.mode == "backward":
            return [(self.first.forward, self.reference.expected_forward),
                    (self.first.grad_input, self.reference.expected_grad_input)]
        return [(self.first.forward, self.reference.expected_forward),
                (ad_modes.derivative(self.mode, self.first), self.expected_derivative)]

    @property
    def as_expected(self) -> list[str]:
        """The names of the outcome's arrays that are the reference's."""
        return self.observed.as_expected

    def encoded(self, name: str) -> list | None:
        """The outcome's array ``name`` (an Outcome field, or "expected_derivative") as the
        record writes it, encoded once per case for the bits it has (another target of the case
        encoded the same bits: most results are alike)."""
        a = self.expected_derivative if name == "expected_derivative" else getattr(self.first, name)
        if a is None:
            return None
        return self.reference.derived(("encoded", a.dtype, a.shape, a.tobytes()), lambda: encode_array(a))
