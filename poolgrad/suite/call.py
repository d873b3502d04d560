"""The framework call: the cases of one batching group that one target runs as one call, stacked
along N (poolgrad/suite/runner.py). Calls are built at collection and handed to the worker
pool, the verdicts and the record, so what a call's cases are and what the spec says of them
is derived once, by the object that owns it:

- a ``Group`` is what the cases of one batching group are, whatever the target: their
  properties (found together: walking a stack's windows costs what one case's walk does), their
  fields as records write them (each array encoded once) and the reference's work
  (poolgrad/verdicts/case.py, on stacks of the group's cases, policies evaluated per value family);
- a ``FrameworkCall`` is one target's call of a group's cases: which cases it held (what the
  other cases of a call were matters to a kernel that writes across cases). A case stacked
  is the case alone: where a path can write outside a case's planes, its framework record
  keeps the cases that can (by their properties) out of the stack (``calls``), and one
  sampled case of every stack is run alone and compared (``differs_alone``).

A group keeps the reference's work and the encoded arrays while checks of its cases in one mode
are pending and drops them after the last one (``done``): the reference's policy results are a
run's largest memory, and the AD modes' checks come after every unit of the reverse mode (they
are no unit's tests).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import zlib

import numpy as np

from poolgrad.adapters import registry
from poolgrad.adapters.base import ARRAY_FIELDS, Outcome, Target
from poolgrad.reference.properties import properties_of_cases
from poolgrad.json_values import encode_array
from poolgrad.verdicts.case import STACK_ELEMENTS, stacked
from poolgrad.verdicts import tolerances
from poolgrad.verdicts.compare import as_f64, identical, within


def op_name(case) -> str:
    return f"{case.spec.op}{case.input.ndim - 2}d"


class Group:
    """The cases of one batching group (Case.group_key), as every target's check reads them."""

    def __init__(self, cases=()):
        self._cases: dict[str, object] = {}  # id -> case, in the order met
        self._pending: collections.Counter = collections.Counter()  # mode -> checks to come
        self._properties: dict[str, frozenset[str]] = {}
        self._references: dict[str, object] = {}
        self._fields: dict[str, dict] = {}
        for case in cases:
            self.add(case)

    def add(self, case, mode: str = "backward", checks: int = 1) -> None:
        """``case`` is one of the group's, checked ``checks`` more times in ``mode``."""
        if self._cases.setdefault(case.id, case) is not case:
            raise ValueError(f"two cases of one run are named {case.id!r}")
        self._pending[mode] += checks

    def done(self, mode: str = "backward") -> None:
        """One check in ``mode`` of a case of the group is over; after the mode's last, the
        reference's work and the encoded arrays go (a later mode derives them again)."""
        self._pending[mode] -= 1
        if self._pending[mode] <= 0:  # the properties stay: a few names per case
            self._references.clear()
            self._fields.clear()

    def _member(self, case):
        if self._cases.get(case.id) is not case:
            self.add(case, checks=0)
        return case

    def properties(self, case) -> frozenset[str]:
        """The case's properties (poolgrad/reference/properties.py); the group's cases not
        known yet are found with it, stacked."""
        if self._member(case).id not in self._properties:
            missing = [c for c in self._cases.values() if c.id not in self._properties]
            self._properties.update(zip((c.id for c in missing),
                                        properties_of_cases(case.spec, [c.input for c in missing])))
        return self._properties[case.id]

    def reference(self, case, among=None):
        """The case's reference (poolgrad/verdicts/case.py, CaseReference): the reference's work is
        done on a stack of the case and the cases ``among`` (by default the group's) not stacked
        yet, up to STACK_ELEMENTS, each case's value family its kin. A framework call asks with
        its own cases: an AD mode's call holds a few of the group's families."""
        if self._member(case).id not in self._references:
            members, size = [], 0
            pool = self._cases.values() if among is None else among
            for c in [case, *(c for c in pool if c.id not in self._references and c is not case)]:
                n = math.prod(c.input.shape)
                if members and size + n > STACK_ELEMENTS:
                    break
                members.append((c.spec, c.input, c.grad_output, c.id, c.family))
                size += n
            self._references.update(stacked(members))
        return self._references[case.id]

    def fields(self, case) -> dict:
        """What the case is, the same for every target (reports.schema.CASE_FIELDS), its arrays
        encoded once. Shared: read only."""
        if self._member(case).id not in self._fields:
            ref = self.reference(case)
            self._fields[case.id] = {
                "case_id": case.id, "family": case.family, "op": op_name(case), "spec": case.spec.to_dict(),
                "dtype": case.spec.dtype, "shape": list(case.input.shape), "input": encode_array(case.input),
                "grad_output": encode_array(case.grad_output), "expected_forward": encode_array(ref.expected_forward),
                "expected_grad_input": encode_array(ref.expected_grad_input)}
        return self._fields[case.id]


class Groups(dict):
    """A process's groups by batching key, shared by the reverse mode's runner and the AD modes'."""

    def add(self, case, mode: str = "backward") -> Group:
        group = self.get(case.group_key)
        if group is None:
            group = self[case.group_key] = Group()
        group.add(case, mode)
        return group


@dataclasses.dataclass(frozen=True, eq=False)
class FrameworkCall:
    """One target's call of ``cases`` (of ``group``), stacked along N in this order."""

    target: Target
    cases: tuple
    group: Group

    @classmethod
    def alone(cls, target: Target, case) -> FrameworkCall:
        """A call of ``case`` by itself: a fuzzed case, a replayed record, a test's direct check."""
        return cls(target, (case,), Group([case]))

    @functools.cached_property
    def _counts(self) -> collections.Counter:
        return collections.Counter(p for c in self.cases for p in self.group.properties(c))

    def reference(self, case):
        """The case's reference (Group.reference), stacked with this call's cases."""
        return self.group.reference(case, self.cases)

    def others(self, case) -> frozenset[str]:
        """The properties some other case of the call has."""
        own = self.group.properties(case) if any(c is case for c in self.cases) else frozenset()
        return frozenset(p for p, n in self._counts.items() if n > (p in own))

    def parts(self) -> tuple[FrameworkCall | None, list[FrameworkCall]]:
        """The calls the target makes of these cases: one of the cases its path stacks (None
        where there are none), and one of its own for each case with a property its framework
        keeps out of stacks (Framework.unstacked), in the order met. Only the first may share
        a worker call with other groups' (Framework.bundles): the others are kept alone for
        writes outside their planes."""
        fw = registry.FRAMEWORKS.get(self.target.framework)
        rules = fw.unstacking(self.target.variant, op_name(self.cases[0])) if fw and len(self.cases) > 1 else ()
        alone = [c for c in self.cases if rules and any(r.holds(self.group.properties(c)) for r in rules)]
        if not alone:
            return self, []
        together = tuple(c for c in self.cases if not any(c is a for a in alone))
        return (dataclasses.replace(self, cases=together) if together else None,
                [dataclasses.replace(self, cases=(c,)) for c in alone])

    def bundles(self) -> bool:
        """Whether the call may share a worker call with other groups' (Framework.bundles): its
        target bundles, it has planes (an empty batch meets the framework in a call of its own)
        and none of its cases has properties its framework keeps out of bundles."""
        fw = registry.FRAMEWORKS.get(self.target.framework)
        if bundle_size(self.target) < 2 or not any(len(c.input) for c in self.cases):
            return False
        rules = fw.unbundling(self.target.variant, op_name(self.cases[0]))
        return not any(r.holds(self.group.properties(c)) for r in rules for c in self.cases)

    def sample(self):
        """The case of a stack that is also run alone (``differs_alone``): the same in every
        run, its position spread over the groups and targets (each target of a group checks its
        own, so a catalogue run checks several of a group's cases)."""
        return self.cases[zlib.crc32(f"{self.cases[0].group_key!r} {self.target.id}".encode()) % len(self.cases)]

    def filled(self, case) -> tuple[np.ndarray, np.ndarray]:
        """``case``'s input and grad_output, its planes repeated to this call's N: the case alone
        in a call of the stack's shape, so a compiled path reuses the stack's compilation and
        kernel choice, and no other case's values take part."""
        planes = sum(len(c.input) for c in self.cases)
        return tuple(np.resize(a, (planes, *a.shape[1:])) for a in (case.input, case.grad_output))


def bundle_size(target: Target) -> int:
    """How many batching groups at most ``target`` runs as one worker call (its framework's
    ``bundles``); 1: each its own."""
    fw = registry.FRAMEWORKS.get(target.framework)
    return fw.bundles.get(target.variant, 1) if fw else 1


def differs_alone(stacked: Outcome, alone: Outcome, reference) -> str:
    """How a case's outcome in a stack differs from its outcome alone (filled: its first
    planes), or "" where they are the same: the status, then each array bit for bit (a NaN's
    payload aside), except that an average's forward or gradient within the op's tolerance of the alone one
    (``reference``: the case's, for its magnitudes) is the same: kernels that add with atomics
    (CUDA's adaptive average pooling) round in another order from call to call, stacked or
    alone, while a write across cases adds another case's values."""
    if stacked.status != alone.status:
        return f"{stacked.status} stacked, {alone.status} alone ({alone.message})"
    differ = [name for name in ARRAY_FIELDS if not identical(getattr(stacked, name), getattr(alone, name))]
    if not differ:
        return ""
    magnitude = {} if reference.spec.is_max else dict(zip(("forward", "grad_input"), reference.magnitude()))
    differ = [name for name in differ if name not in magnitude or not _rounded_alike(
        getattr(stacked, name), getattr(alone, name), reference.spec, magnitude[name])]
    return f"{', '.join(differ)} differ from the case alone" if differ else ""


def _rounded_alike(stacked, alone, spec, magnitude) -> bool:
    """Within the op's tolerance of each other, zeros of one sign (a sum's order never flips one)."""
    if np.shape(stacked) != np.shape(alone):
        return False
    a, b = as_f64(stacked), as_f64(alone)
    bound = tolerances.bound(spec.op, spec.dtype, np.maximum(np.abs(b), magnitude))
    return bool((within(a, b, bound) & ((a != 0) | (b != 0) | (np.signbit(a) == np.signbit(b)))).all())
