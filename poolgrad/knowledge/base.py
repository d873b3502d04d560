"""The loaded knowledge base: its findings in file order and the lanes' history, with the
findings that can apply to a target (and to an AD mode's record) looked up once."""

from __future__ import annotations

from .finding import Finding
from .machine import Machine


class Knowledge(list):
    """The findings, in file order, with those that can apply to a target looked up once."""

    def __init__(self, findings=(), history: dict | None = None):
        super().__init__(findings)
        self.history = history or {}
        self._by_target: dict = {}

    def for_target(self, framework, variant, device, version, machine: Machine) -> list[Finding]:
        key = (framework, variant, device, version, machine)
        if key not in self._by_target:
            self._by_target[key] = [g for f in self if f.in_target(framework, variant, device, version, machine)
                                    and (g := f.on_machine(machine)) is not None]
        return self._by_target[key]

    def for_mode(self, framework, variant, device, version, machine: Machine, mode: str) -> list[Finding]:
        """The findings of a target as claims on a record of ``mode`` (:meth:`Finding.in_mode`)."""
        key = (framework, variant, device, version, machine, mode)
        if key not in self._by_target:
            views = (f.in_mode(mode) for f in self.for_target(framework, variant, device, version, machine))
            self._by_target[key] = [f for f in views if f is not None]
        return self._by_target[key]

    def undefined(self, framework, variant, device, version, machine: Machine, op: str, dtype: str) -> Finding | None:
        """The finding that calls every call of this target's ``op`` in ``dtype`` undefined (it
        reads or writes memory it does not own: it may hang or corrupt the process), or None:
        asked before any case runs, so only a claim scoped by target, op and dtype answers; one
        scoped by what a case or call holds (when, when_call, min_call_elements) explains the
        result of a call that was made."""
        return next((f for f in self.for_target(framework, variant, device, version, machine)
                     if f.verdict == "undefined" and not (f.when or f.when_call or f.min_call_elements)
                     and f.in_scope(op, dtype, frozenset())), None)
