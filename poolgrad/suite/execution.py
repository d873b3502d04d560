"""Running checks in one pytest process: the framework workers, the batched runners of the
reverse mode and the AD modes, and one (case, target) check whose record travels to the
controller as a test report property."""

from __future__ import annotations

import json
import tempfile
import time

from poolgrad.knowledge.machine import Machine
from poolgrad.reports.records import against_case
from poolgrad.reports.schema import CASE_FIELDS

from . import options
from .machine import machine as machine_of
from .run import Run
from .call import Groups
from .runner import GroupRunner, case_and_target

RECORD_KEY = "poolgrad_record"
FRAMEWORK_KEY = "poolgrad_framework"


class Execution:
    def __init__(self, run: Run):
        self.run = run
        self._pool = None
        self._cold_cache = None
        self._runner = None
        self._mode_runners: dict = {}
        self._groups = Groups()  # the batching groups' cases, shared by every runner
        self._described: dict[str, dict] = {}
        self._machines: dict[str, Machine] = {}
        # A case's own fields travel from a process to the controller with its first record
        # only (a unit of work holds every target of a case); the controller fills them back.
        self._sent_cases: set[str] = set()

    @property
    def runner(self) -> GroupRunner:
        if self._runner is None:
            from poolgrad.adapters.pool import ONE_THREAD_ENV, WorkerPool, compile_cache_env, shared_gpu_env
            config = self.run.config
            cache = options.compile_cache(config.getoption("compile_cache"))
            if cache is None:
                self._cold_cache = tempfile.TemporaryDirectory(prefix="poolgrad-cold-cache-")
                cache = self._cold_cache.name
            # One thread per framework worker: pytest-xdist already keeps every core busy, and
            # oversubscribed OpenMP pools make tiny pooling calls 50x slower.
            self._pool = WorkerPool(env={**ONE_THREAD_ENV, **shared_gpu_env(), **compile_cache_env(cache)})
            self._runner = GroupRunner(self._pool, timeout_s=config.getoption("case_timeout"),
                                       repeat=config.getoption("repeat"), groups=self._groups)
            units = self.run.units()
            for case, target in filter(None, map(case_and_target, self.run.items)):
                for c in self.run.checks(case):
                    self._runner.register(c, target, units.get(case.id))
        return self._runner

    def describe(self, framework: str) -> dict:
        if framework not in self._described:
            self._described[framework] = self.runner.pool.describe(framework)
        return self._described[framework]

    def machine(self, framework: str) -> Machine:
        if framework not in self._machines:  # as fixed as its description: asked on every check
            self._machines[framework] = machine_of(framework, self.describe(framework).get("environment"))
        return self._machines[framework]

    def mode_runner(self, mode: str):
        """The batched runner of one AD mode, its groups being that mode's collected tests."""
        if mode not in self._mode_runners:
            from .ad_modes import ModeRunner
            runner = ModeRunner(self.runner.pool, mode, timeout_s=self.run.config.getoption("case_timeout"),
                                groups=self._groups)
            for item in self.run.items:
                if getattr(item, "originalname", None) == f"test_{mode}":
                    for c in self.run.checks(item.callspec.params["mode_case"]):
                        runner.register(c, item.callspec.params["mode_target"])
            self._mode_runners[mode] = runner
        return self._mode_runners[mode]

    def run_check(self, case, target, node, mode: str = "backward") -> list:
        """The checks of ``case`` and of each of its draws (Run.checks) on ``target``, one record
        each on ``node``."""
        return [self._check(c, target, node, mode) for c in self.run.checks(case)]

    def _check(self, case, target, node, mode: str):
        from . import check
        first_use = target.framework not in self._described
        info = self.describe(target.framework)
        if first_use:  # the controller learns versions and devices from the processes that ran them
            node.user_properties.append((FRAMEWORK_KEY, json.dumps({target.framework: info}, default=str)))
        start = time.perf_counter()
        runner = self.runner if mode == "backward" else self.mode_runner(mode)
        call, outcomes = runner.run(case, target)
        checked = check.check(case, target, info.get("version") or "", outcomes, self.run.knowledge,
                              time.perf_counter() - start, self.machine(target.framework), mode, call)
        call.group.done(mode)
        if (stacked := outcomes[0].info.get("stacked")) and not checked.record["races"]:
            # The path wrote across the cases of a stack that its framework record lets stack
            # (Framework.unstacked): the result is the case's alone, and the run's own error.
            # Where a finding in scope calls the result a race (memory a kernel never writes),
            # arrays differ from call to call: no evidence of a write across cases.
            checked.outcome = checked.record["outcome"] = "fail"
            checked.message = checked.record["message"] = (
                f"{stacked}; {target.id} must keep such cases out of stacks (its framework record's unstacked); "
                f"alone: {checked.message}")
        checked.record["run_id"] = self.run.run_id
        record = checked.record
        # Sent as the results file holds it, against its case (records.against_case), the
        # case's fields with its first result only: the controller writes it as it comes.
        if case.id in self._sent_cases:
            record = against_case(record)
        else:
            record = {**against_case(record), **{f: record[f] for f in CASE_FIELDS}}
        self._sent_cases.add(case.id)
        node.user_properties.append((RECORD_KEY, json.dumps(record, allow_nan=False)))
        return checked

    def close(self):
        if self._pool is not None:
            self._pool.close()
        if self._cold_cache is not None:
            self._cold_cache.cleanup()
