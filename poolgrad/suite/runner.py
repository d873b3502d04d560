"""Batched execution: every (target, spec, dtype, channel count, spatial shape) group runs as
one framework call, so compiled variants compile once per group however many cases it holds.

Whole cases are stacked along N: the framework sees each case's real channel count (channels-
last kernels vectorize over channels, so a case with C = 33 must reach them with 33 channels,
not as 33 single-channel planes). Empty-batch cases keep a group of their own so the framework
meets the empty tensor itself.
"""

from __future__ import annotations

from poolgrad.adapters.base import Outcome, Target

from .call import FrameworkCall, Groups, differs_alone


def case_and_target(item):
    """(case, target) of a collected conformance test, else None (the project's other tests)."""
    cs = getattr(item, "callspec", None)
    if cs and "case" in cs.params and "target" in cs.params:
        return cs.params["case"], cs.params["target"]
    return None


class GroupRunner:
    mode = "backward"

    def __init__(self, pool, *, timeout_s: float, repeat: int = 1, groups: Groups | None = None):
        self.pool = pool
        self.timeout_s = timeout_s
        self.repeat = max(1, repeat)
        self.groups = Groups() if groups is None else groups
        self._calls: dict[tuple, FrameworkCall] = {}
        self._done: dict[tuple, tuple[FrameworkCall, list[Outcome]]] = {}

    def register(self, case, target: Target) -> None:
        """Declare that this process will check ``case`` on ``target`` (call at collection):
        the case joins its target's call of its batching group."""
        group = self.groups.add(case, self.mode)
        key = (target, case.group_key)
        call = self._calls.get(key)
        self._calls[key] = FrameworkCall(target, (*call.cases, case) if call else (case,), group)

    def run(self, case, target: Target) -> tuple[FrameworkCall, list[Outcome]]:
        """The call ``case`` ran in on ``target`` and the outcome of each repetition (first,
        then repeats); the call runs when the first of its cases is asked for."""
        key = (target, case.id)
        if key not in self._done:
            call = self._calls.pop((target, case.group_key), None)
            if call is None or not any(c is case for c in call.cases):
                call = FrameworkCall.alone(target, case)
            for part in call.calls():
                runs = [self._run(part) for _ in range(self.repeat)]
                if len(part.cases) > 1 and self.mode == "backward":  # the AD modes' calls: a few families
                    self._against_alone(part, runs[0])
                for i, member in enumerate(part.cases):
                    # A case rerun by itself (its call crashed) ran in a call of its own.
                    own = part if not runs[0][i].info.get("alone") else FrameworkCall(target, (member,), part.group)
                    self._done[(target, member.id)] = (own, [run[i] for run in runs])
        return self._done.pop(key)

    def _against_alone(self, call: FrameworkCall, outcomes: list[Outcome]) -> None:
        """The call's sampled case run alone (in the stack's shape); where its outcome differs
        from the stacked one, the case's outcome is the alone one, saying so (``stacked``). Only
        a stack that ran: one that failed was rerun case by case already (WorkerPool.run_group),
        and one that timed out would take its time again."""
        i = next(i for i, c in enumerate(call.cases) if c is call.sample())
        case = call.cases[i]
        if not len(case.input) or not outcomes[i].ran or outcomes[i].info.get("alone"):
            return
        alone = self._run_filled(call, case)
        if difference := differs_alone(outcomes[i], alone, call.reference(case)):
            outcomes[i] = alone
            alone.info.update(alone=True, stacked=f"stacked with {len(call.cases) - 1} other cases: {difference}")

    def _run_filled(self, call: FrameworkCall, case) -> Outcome:
        x, g = call.filled(case)
        return self.pool.run_group(call.target, case.spec, [x], [g], self.timeout_s)[0].split(
            [len(case.input), len(x) - len(case.input)])[0]

    def outcomes(self, case, target: Target) -> list[Outcome]:
        return self.run(case, target)[1]

    def _run(self, call: FrameworkCall) -> list[Outcome]:
        return self.pool.run_group(call.target, call.cases[0].spec, [m.input for m in call.cases],
                                   [m.grad_output for m in call.cases], self.timeout_s)
