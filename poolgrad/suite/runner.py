"""Batched execution: every (target, spec, dtype, channel count, spatial shape) group runs as
one framework call, so compiled variants compile once per group however many cases it holds.

Whole cases are stacked along N: the framework sees each case's real channel count (channels-
last kernels vectorize over channels, so a case with C = 33 must reach them with 33 channels,
not as 33 single-channel planes). Empty-batch cases keep a group of their own so the framework
meets the empty tensor itself.
"""

from __future__ import annotations

from poolgrad.adapters.base import Outcome, Target

from .call import FrameworkCall, Groups, bundle_size, differs_alone


def case_and_target(item):
    """(case, target) of a collected conformance test, else None (the project's other tests, and
    the placeholder pytest collects where no pair has a call: its parameters are unset)."""
    cs = getattr(item, "callspec", None)
    if cs and isinstance(cs.params.get("target"), Target):
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
        # (target, work unit) -> the keys of the calls that run as one bundle (Framework.bundles)
        self._bundles: dict[tuple, list[tuple]] = {}
        self._bundle_of: dict[tuple, tuple] = {}

    def register(self, case, target: Target, unit: str | None = None) -> None:
        """Declare that this process will check ``case`` on ``target`` (call at collection):
        the case joins its target's call of its batching group, and where ``unit`` (its work
        unit, suite/scheduling.py) is given and the target bundles, that call joins the unit's
        bundle (the reverse mode's only)."""
        group = self.groups.add(case, self.mode)
        key = (target, case.group_key)
        call = self._calls.get(key)
        self._calls[key] = FrameworkCall(target, (*call.cases, case) if call else (case,), group)
        if call is None and unit is not None and self.mode == "backward" and bundle_size(target) > 1:
            self._bundle_of[key] = (target, unit)
            self._bundles.setdefault((target, unit), []).append(key)

    def run(self, case, target: Target) -> tuple[FrameworkCall, list[Outcome]]:
        """The call ``case`` ran in on ``target`` and the outcome of each repetition (first,
        then repeats); the call runs when the first of its cases is asked for, with every
        pending call of its bundle."""
        key = (target, case.id)
        if key not in self._done:
            call = self._calls.pop((target, case.group_key), None)
            if call is None or not any(c is case for c in call.cases):
                calls = [FrameworkCall.alone(target, case)]
            else:
                bundle = self._bundles.pop(self._bundle_of.get((target, case.group_key)), ())
                calls = [call, *filter(None, (self._calls.pop(k, None) for k in bundle))]
                for k in bundle:
                    del self._bundle_of[k]
            together, alone = [], []
            for c in calls:
                stacked, apart = c.parts()
                if stacked and len(calls) > 1 and stacked.bundles():
                    together.append(stacked)
                elif stacked:
                    alone.append(stacked)
                alone += apart
            if len(together) > 1:
                self._run_bundle(together)
            else:
                alone = together + alone
            for part in alone:
                runs = [self._run(part) for _ in range(self.repeat)]
                if self.mode == "backward":  # the AD modes' calls: a few families
                    self._against_alone(part, runs[0])
                self._keep(part, runs)
        return self._done.pop(key)

    def _keep(self, part: FrameworkCall, runs: list[list[Outcome]]) -> None:
        for i, member in enumerate(part.cases):
            # A case rerun by itself (its call crashed) ran in a call of its own.
            own = part if not runs[0][i].info.get("alone") else FrameworkCall(part.target, (member,), part.group)
            self._done[(part.target, member.id)] = (own, [run[i] for run in runs])

    def _run_bundle(self, parts: list[FrameworkCall]) -> None:
        """Several groups' stacked calls as one worker call (WorkerPool.run_bundle), each
        repetition. The sampled cases of the parts that ran in it are checked alone in one more
        bundle call of the same shapes, which a compiled variant answers with the bundle's
        compilation; a part that ran by itself (the bundle call failed) is checked by itself."""
        target = parts[0].target
        runs = [self.pool.run_bundle(target, [_member(p) for p in parts], self.timeout_s) for _ in range(self.repeat)]
        first = runs[0]
        sampled = [i for i, p in enumerate(parts) if self._sampled(p, first[i])]
        bundled = [i for i in sampled if first[i][0].info.get("bundle")]
        if bundled:
            members = [_member(p) for p in parts]
            for i in bundled:
                x, g = parts[i].filled(parts[i].sample())
                members[i] = (parts[i].cases[0].spec, [x], [g])
            alone = self.pool.run_bundle(target, members, self.timeout_s)
            for i in bundled:
                self._compare(parts[i], first[i], _own_planes(alone[i][0], parts[i].sample(), members[i][1][0]))
        for i, part in enumerate(parts):
            if i in sampled and i not in bundled:
                self._against_alone(part, first[i])
            self._keep(part, [run[i] for run in runs])

    def _sampled(self, call: FrameworkCall, outcomes: list[Outcome]) -> bool:
        """Whether the call's sampled case is checked alone: a stack that ran. One that failed
        was rerun case by case already (WorkerPool.run_group), and one that timed out would
        take its time again."""
        i = next(i for i, c in enumerate(call.cases) if c is call.sample())
        return len(call.cases) > 1 and bool(len(call.cases[i].input)) and outcomes[i].ran and not outcomes[i].info.get("alone")

    def _against_alone(self, call: FrameworkCall, outcomes: list[Outcome]) -> None:
        """The call's sampled case run alone (in the stack's shape); where its outcome differs
        from the stacked one, the case's outcome is the alone one, saying so (``stacked``)."""
        if self._sampled(call, outcomes):
            self._compare(call, outcomes, self._run_filled(call, call.sample()))

    def _compare(self, call: FrameworkCall, outcomes: list[Outcome], alone: Outcome) -> None:
        i = next(i for i, c in enumerate(call.cases) if c is call.sample())
        if difference := differs_alone(outcomes[i], alone, call.reference(call.cases[i])):
            outcomes[i] = alone
            alone.info.update(alone=True, stacked=f"stacked with {len(call.cases) - 1} other cases: {difference}")

    def _run_filled(self, call: FrameworkCall, case) -> Outcome:
        x, g = call.filled(case)
        return _own_planes(self.pool.run_group(call.target, case.spec, [x], [g], self.timeout_s)[0], case, x)

    def outcomes(self, case, target: Target) -> list[Outcome]:
        return self.run(case, target)[1]

    def _run(self, call: FrameworkCall) -> list[Outcome]:
        return self.pool.run_group(call.target, call.cases[0].spec, [m.input for m in call.cases],
                                   [m.grad_output for m in call.cases], self.timeout_s)


def _member(call: FrameworkCall) -> tuple:
    """A stacked call as a bundle's member (WorkerPool.run_bundle)."""
    return call.cases[0].spec, [m.input for m in call.cases], [m.grad_output for m in call.cases]


def _own_planes(filled: Outcome, case, x) -> Outcome:
    """The outcome of ``case`` filled to the planes of ``x`` (FrameworkCall.filled): its own."""
    return filled.split([len(case.input), len(x) - len(case.input)])[0]
