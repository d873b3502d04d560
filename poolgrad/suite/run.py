"""What a conformance run is, the same in every pytest process: its options, targets, cases,
shard, run id and knowledge base, and which (case, target) pairs have a framework call."""

from __future__ import annotations

import contextlib
import gc
import uuid

import pytest

from poolgrad.adapters import registry
from poolgrad.knowledge import sources
from poolgrad.knowledge.schema import FindingsError

from . import options


def test_id(case, target) -> str:
    """A conformance test's id, its parameters: the case's id, then the target's."""
    return f"{case.id}-{target.id}"


class Run:
    def __init__(self, config):
        self.config = config
        self.is_controller = not hasattr(config, "workerinput")
        self.targets, self.missing = options.selected_targets(config)
        self.shard = options.shard(config.getoption("shard"))
        self.run_id = (config.workerinput["poolgrad_run_id"] if not self.is_controller
                       else uuid.uuid4().hex[:12])
        try:
            self.knowledge = sources.load(extra=config.getoption("findings") or ())
        except FindingsError as e:
            raise pytest.UsageError(str(e)) from None
        self.items = []  # this process's collected tests, in run order
        self._cases = None
        self._tests: list | None = None
        self._draws: dict = {}
        self._unsupported: dict[tuple, str | None] = {}
        self._not_run: set[str] = set()  # the reasons of pairs whose call is undefined (verdict not_run)
        self._machines: dict[str, tuple] = {}  # framework -> (its installed version, this machine as findings see it)
        self._units: dict[str, str] | None = None
        if config.getoption("case_file"):
            self.cases()  # a bad file is refused here, as one usage line, not a collection traceback

    @property
    def narrowed(self) -> bool:
        """Whether -k or -m selects part of the run (the catalogue is then not all there)."""
        return bool(self.config.option.keyword or self.config.option.markexpr)

    def cases(self):
        if self._cases is None:
            path = self.config.getoption("case_file")
            with long_lived():
                if path:
                    from poolgrad.cases.case_file import CaseFileError, load_case_file
                    try:
                        self._cases = load_case_file(path)
                    except CaseFileError as e:
                        raise pytest.UsageError(str(e)) from None
                else:
                    from poolgrad.cases import catalogue
                    self._cases = catalogue()
        return self._cases

    def tests(self):
        """The cases that are tests: every case but the draws of another (cases.model.with_draws)."""
        if self._tests is None:
            from poolgrad.cases.model import with_draws
            pairs = with_draws(self.cases())
            self._tests = [c for c, _ in pairs]
            self._draws = {c: draws for c, draws in pairs if draws}
        return self._tests

    def checks(self, case) -> tuple:
        """What a test of ``case`` checks: the case, then its draws (most cases have none)."""
        self.tests()
        return (case, *self._draws.get(case, ()))

    def unsupported(self, target, spec, shape) -> str | None:
        """Why ``target`` makes no call for ``spec`` on an input of ``shape``, or None: its
        framework's plan has none (adapters.registry.plan), or a finding calls the call undefined
        and --run-undefined was not given (``not_run``). A pair without a call is no test item:
        the controller writes its result once per target and reason (Results.unsupported_records)."""
        key = (target, spec, tuple(shape[1:]))
        if key not in self._unsupported:
            reason = registry.unsupported(target, spec, shape)
            if reason is None and not self.config.getoption("run_undefined"):
                reason = self._undefined(target, f"{spec.op}{len(shape) - 2}d", spec.dtype)
            self._unsupported[key] = reason
        return self._unsupported[key]

    def _undefined(self, target, op: str, dtype: str) -> str | None:
        from .machine import machine
        if target.framework not in self._machines:  # asked for every (target, spec, shape) of the run
            self._machines[target.framework] = (registry.installed_version(target.framework) or "",
                                                machine(target.framework))
        version, here = self._machines[target.framework]
        finding = self.knowledge.undefined(target.framework, target.variant, target.device, version, here, op, dtype)
        if finding is None:
            return None
        reason = (f"{finding.id}: {finding.title}; the call's behaviour is undefined, so it is not made "
                  f"(--run-undefined makes it)")
        self._not_run.add(reason)
        return reason

    def not_run(self, reason: str) -> bool:
        """Whether pairs refused for ``reason`` (unsupported) have a call that is not made because
        a finding calls it undefined (verdict not_run), not a call the API lacks."""
        return reason in self._not_run

    def units(self) -> dict[str, str]:
        """Test case id -> its work unit (suite/scheduling.py, units), the same in every process."""
        if self._units is None:
            from .scheduling import units
            self._units = units(self.tests(), self.targets, self.unsupported)
        return self._units

    def pairs(self) -> list[tuple[str, object, object]]:
        """(test id, case, target) of every pair that has a framework call: the conformance
        tests' parameters, and what the controller's scheduler names a test's unit by."""
        return [(test_id(c, t), c, t) for c in self.tests() for t in self.targets if self.runs(c, t)]

    def test_units(self) -> dict[str, str]:
        """Test id (a pair's, test_id) -> its work unit: the scheduler looks a test up here
        instead of reading its case back out of the id."""
        units = self.units()
        return {tid: units[c.id] for tid, c, _ in self.pairs()}

    def runs(self, case, target) -> bool:
        return self.unsupported(target, case.spec, case.input.shape) is None


@contextlib.contextmanager
def long_lived():
    """For making what lives as long as the run (the cases and their arrays, the test items):
    the cyclic garbage collector is off meanwhile and what exists after is frozen (gc.freeze),
    so no full collection walks it again. Collecting 27,000 cases' items spent 4.6 of its 14 s
    in the collector."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.freeze()


# Conformance tests between two full collections (freeze_survivors).
FREEZE_EVERY = 4096


def freeze_survivors():
    """What a process still holds after thousands of tests (pytest's reports, the items, the
    caches) mostly stays to the end: collect the garbage, then freeze the rest, and from here
    on leave full passes to the next call. A full pass walks every object not frozen, and a run
    holds more with every test: on the collector's own schedule, full passes took a sixth of a
    run at ten cases per spec. Young generations are collected as before. A collector the
    user turned off stays off (as in long_lived)."""
    if not gc.isenabled():
        return
    gc.collect()
    gc.freeze()
    if not _own_schedule:
        _own_schedule.append(gc.get_threshold())
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, 1 << 30)


_own_schedule: list[tuple] = []  # the collector's thresholds while freeze_survivors has replaced them


def restore_collector():
    """The collector's own schedule again, at the end of a run (a process may run pytest
    more than once)."""
    if _own_schedule:
        gc.set_threshold(*_own_schedule.pop())
