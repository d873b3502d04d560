"""Batched execution: every (target, spec, dtype, channel count, spatial shape) group runs as
one framework call, so compiled variants compile once per group however many cases it holds.

Whole cases are stacked along N: the framework sees each case's real channel count (channels-
last kernels vectorize over channels, so a case with C = 33 must reach them with 33 channels,
not as 33 single-channel planes). Empty-batch cases keep a group of their own so the framework
meets the empty tensor itself.
"""

from __future__ import annotations

from poolgrad.adapters.base import Outcome, Target


def case_and_target(item):
    """(case, target) of a collected conformance test, else None (the project's other tests)."""
    cs = getattr(item, "callspec", None)
    if cs and "case" in cs.params and "target" in cs.params:
        return cs.params["case"], cs.params["target"]
    return None


class GroupRunner:
    def __init__(self, pool, *, timeout_s: float, repeat: int = 1):
        self.pool = pool
        self.timeout_s = timeout_s
        self.repeat = max(1, repeat)
        self._members: dict[tuple, list] = {}
        self._done: dict[tuple, list[Outcome]] = {}

    def register(self, case, target: Target) -> None:
        """Declare that this process will check ``case`` on ``target`` (call at collection)."""
        self._members.setdefault((target, case.group_key), []).append(case)

    def outcomes(self, case, target: Target) -> list[Outcome]:
        """The outcome of each repetition for ``case`` on ``target`` (first, then repeats)."""
        key = (target, case.id)
        if key not in self._done:
            gkey = (target, case.group_key)
            members = self._members.get(gkey) or [case]
            if not any(m is case for m in members):
                members = [case]
            runs = [self._run(target, members) for _ in range(self.repeat)]
            for i, member in enumerate(members):
                self._done[(target, member.id)] = [run[i] for run in runs]
            self._members.pop(gkey, None)
        return self._done.pop(key)

    def _run(self, target: Target, members: list) -> list[Outcome]:
        outcomes = self.pool.run_group(target, members[0].spec, [m.input for m in members],
                                       [m.grad_output for m in members], self.timeout_s)
        for o, m in zip(outcomes, members):  # a kernel that writes across cases: what its call held
            o.info["call_members"] = [m] if o.info.get("alone") else members
        return outcomes
