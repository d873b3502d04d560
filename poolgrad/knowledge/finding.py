"""The finding: one curated behaviour of a framework path (its scope and its claim), and its typed
upstream references. A findings file's entry becomes one in schema.py."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet

from .scope import features_hold, matches_any, version_in

if TYPE_CHECKING:
    from .machine import Machine

NO_UPSTREAM = "no upstream report"


@dataclasses.dataclass(frozen=True)
class Reference:
    type: str
    url: str
    title: str = ""
    state: str = ""   # a fix's: "merged in 2.5.0", "open", "closed unmerged", ...
    note: str = ""    # why a related thread bears on the finding


@dataclasses.dataclass(frozen=True)
class Finding:
    id: str
    title: str
    framework: str
    variants: tuple[str, ...]
    devices: tuple[str, ...]
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    when: tuple[str, ...]              # case properties that must all hold ("!name": must not)
    when_call: tuple[str, ...]         # properties of some case of the same framework call
    cpu_features: tuple[str, ...]      # "avx512f" must be present, "!avx512f" absent
    # Per dtype, CPU features the dtype is in scope on (where a kernel library takes a dtype
    # only on some CPUs): ((dtype, requirements), ...); the other dtypes hold on every CPU.
    dtype_cpu_features: tuple[tuple[str, tuple[str, ...]], ...]
    kernel_features: tuple[str, ...]   # the same, over the features the framework's kernels may use
    machine_facts: tuple[tuple[str, bool | str], ...]  # facts the framework's environment must have
    min_call_elements: int             # the framework call (cases stacked) has at least this many
    verdict: str                       # "policy" or the claimed verdict
    forward: dict                      # partial policies (keys of verdicts.Policy)
    gradient: dict
    error: tuple[tuple[str, ...], str] | None  # (exception types, message regex) of a failure claim
    behaviour: str
    source: str
    link: str
    since: str
    versions: SpecifierSet = SpecifierSet()
    impact: str = ""
    upstream: tuple[Reference, ...] = ()
    example: Path | None = None        # a small case file showing the behaviour
    # The derivatives it is about: "backward" (reverse mode), "jvp", "double_backward"; how its
    # claim reads in each: :meth:`in_mode`.
    modes: tuple[str, ...] = ("backward",)

    # -- scope ---------------------------------------------------------------------------
    def in_target(self, framework: str, variant: str, device: str, version: str, machine: Machine) -> bool:
        return (framework == self.framework and matches_any(variant, self.variants)
                and matches_any(device, self.devices) and version_in(str(self.versions), version)
                and features_hold(self.cpu_features, machine.cpu_features)
                and features_hold(self.kernel_features, machine.kernel_features(framework))
                and all(machine.facts(framework).get(k) == v for k, v in self.machine_facts))

    def on_machine(self, machine: Machine) -> "Finding | None":
        """The finding less the dtypes whose ``dtype_cpu_features`` this machine's CPU does not
        meet; None where no dtype is left."""
        dropped = {d for d, required in self.dtype_cpu_features if not features_hold(required, machine.cpu_features)}
        if not dropped:
            return self
        kept = tuple(d for d in self.dtypes if d not in dropped)
        return dataclasses.replace(self, dtypes=kept) if kept else None

    def in_scope(self, op: str, dtype: str, properties: frozenset[str], call_elements: int = 0,
                 call_properties=lambda: frozenset()) -> bool:
        """``call_properties()``: the properties of every case of the framework call, united
        (asked only by a finding with ``when_call``: a kernel that writes across cases)."""
        return (matches_any(op, self.ops) and matches_any(dtype, self.dtypes)
                and features_hold(self.when, properties)
                and call_elements >= self.min_call_elements
                and (not self.when_call or features_hold(self.when_call, call_properties())))

    def matches_failure(self, verdict: str, message: str) -> bool:
        """A failure claim: the verdict, and for error/crash the type and message. A "wrong"
        claim says only that the path diverges there by no fixed rule: any divergent result
        that ran (whatever policy the search happens to name for it) matches, in an AD mode also
        one whose modes disagree (inconsistent_modes: one side follows no rule), and one whose
        indices point at no element of the forward (inconsistent_indices). A "nondeterministic"
        claim (adds that race, as GPU atomics do) matches what "wrong" does, results that differ
        between repeats, a result whose sums only took another order (reordered), and a
        conforming result too: the race can land on the spec's order. An
        "undefined" claim (the call reads or writes memory it does not own) matches every result:
        arrays, an error, a crash or a hang, whatever the memory held; a run does not make such a
        call unless asked (--run-undefined)."""
        diverged = ("policy", "inconsistent", "inconsistent_modes", "inconsistent_indices", "wrong")
        if self.verdict == "undefined":
            return True
        if self.verdict == "wrong":
            return verdict in diverged
        if self.verdict == "nondeterministic":
            return verdict in (*diverged, "nondeterministic", "reordered", "conforms")
        if verdict != self.verdict:
            return False
        if self.error is None:
            return True
        kinds, pattern = self.error
        return message.startswith(kinds) and re.search(pattern, message) is not None

    @property
    def claims_policy(self) -> bool:
        return self.verdict == "policy"

    @property
    def specificity(self) -> int:
        """How many conditions its scope sets (the judge's credit: the most specific claim that
        explains a result takes it): each case or call property, and each of ops, dtypes,
        variants, devices, CPU or kernel features, machine facts and call size it restricts."""
        restricted = (self.ops, self.dtypes, self.variants, self.devices)
        return (len(self.when) + len(self.when_call) + sum("*" not in r for r in restricted)
                + len(self.cpu_features) + len(self.kernel_features) + len(self.machine_facts)
                + bool(self.min_call_elements))

    def in_mode(self, mode: str) -> "Finding | None":
        """The finding as a claim on a record of ``mode`` (None: it claims nothing there), with
        ``forward`` the policy of the record's own derivative and ``gradient`` the reverse mode's.

        A record of an AD mode holds the mode's derivative and the reverse-mode gradient of the
        same call. That gradient is the reverse mode's, so every finding that lists "backward"
        claims it with its ``gradient`` (its ``forward`` is the forward pass, which the record
        does not judge). The mode's own policy comes from the findings that list the mode: the
        ``forward`` of one that does not list "backward" (the mode runs its own kernel), the
        ``gradient`` of one that does (the mode follows the gradient's selection). A failure
        claim holds in the modes it lists."""
        if mode == "backward" or not self.claims_policy:
            return self if mode in self.modes else None
        if "backward" not in self.modes:
            return dataclasses.replace(self, modes=(mode,)) if mode in self.modes else None
        own = self.gradient if mode in self.modes else {}
        if not (own or self.gradient):
            return None
        return dataclasses.replace(self, forward=own, modes=(mode,))

    def claim_text(self) -> str:
        if self.claims_policy:
            first = "forward" if "backward" in self.modes else "/".join(self.modes)
            parts = [f"{side} {policy_text(p)}" for side, p in ((first, self.forward), ("gradient", self.gradient)) if p]
            return "policy: " + "; ".join(parts)
        if self.error:
            return f"{self.verdict}: {'|'.join(self.error[0])} /{self.error[1]}/"
        return self.verdict

    def summary(self) -> dict:
        """What a results record carries of the finding that explained it: ``link`` (its first
        report, or "no upstream report") and, where it has any, its typed upstream references
        (their empty fields left out)."""
        refs = [{k: v for k, v in dataclasses.asdict(r).items() if v} for r in self.upstream]
        return {"id": self.id, "title": self.title, "link": self.link, **({"upstream": refs} if refs else {})}


def policy_text(p: dict) -> str:
    """A (partial) policy as people read it: ``tie=last, nan=propagate``."""
    return ", ".join(f"{k}={v}" for k, v in p.items())
