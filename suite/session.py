"""State of one pytest process's conformance run: cases, targets, workers, results."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from adapters import registry
from cases import findings
from reports.schema import CASE_FIELDS

from . import options
from .machine import machine as machine_of, record as machine_record
from .runner import GroupRunner, case_and_target

# Environment switches known to change pooling behaviour; only these are recorded.
ENV_SWITCHES = ("TF_ENABLE_MAXPOOL_NANPROP", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC", "XLA_FLAGS",
                "TF_XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS", "CUBLAS_WORKSPACE_CONFIG", "TORCHINDUCTOR_FREEZING",
                "JAX_ENABLE_X64", "JAX_DEFAULT_MATMUL_PRECISION", "NVIDIA_TF32_OVERRIDE")
RECORD_KEY = "poolgrad_record"
FRAMEWORK_KEY = "poolgrad_framework"


class RunState:
    def __init__(self, config):
        self.config = config
        self.is_controller = not hasattr(config, "workerinput")
        self.targets, self.missing = options.selected_targets(config)
        self.shard = options.shard(config.getoption("shard"))
        self.run_id = (config.workerinput["poolgrad_run_id"] if not self.is_controller
                       else uuid.uuid4().hex[:12])
        try:
            self.knowledge = findings.load(config.getoption("findings") or findings.DEFAULT_PATH)
        except findings.FindingsError as e:
            raise pytest.UsageError(str(e)) from None
        self._cases = None
        self.items = []
        self._pool = None
        self._cold_cache = None
        self._runner = None
        self._mode_runners: dict = {}
        self._described: dict[str, dict] = {}
        self.frameworks_seen: dict[str, dict] = {}
        self.counts: dict[tuple[str, str], int] = {}
        self.explaining: set[str] = set()         # findings that explained a result
        self.contradicted: dict[str, int] = {}    # finding -> results in scope it did not explain
        self._results_fh = None
        self._results_writer = None
        self._memory_records: list[dict] | None = None
        # A case's own fields travel from a process to the controller with its first record
        # only (a unit of work holds every target of a case); the controller fills them back.
        self._sent_cases: set[str] = set()
        self._case_fields: dict[str, dict] = {}
        self._unsupported: dict[tuple, str | None] = {}
        if config.getoption("case_file"):
            self.cases()  # a bad file is refused here, as one usage line, not a collection traceback
        if self.is_controller:
            self._open_results()

    # -- cases ---------------------------------------------------------------------------
    def cases(self):
        if self._cases is None:
            path = self.config.getoption("case_file")
            if path:
                from cases.case_file import CaseFileError, load_case_file
                try:
                    self._cases = load_case_file(path)
                except CaseFileError as e:
                    raise pytest.UsageError(str(e)) from None
            else:
                from cases import catalogue
                self._cases = catalogue()
        return self._cases

    # -- planning ------------------------------------------------------------------------
    def unsupported(self, target, spec, shape) -> str | None:
        """Why ``target`` has no call for ``spec`` on an input of ``shape`` (its framework's
        plan, adapters.registry.plan), or None. A pair without a call is no test item: the
        controller writes its result once per target and reason (``unsupported_records``)."""
        key = (target, spec, tuple(shape[1:]))
        if key not in self._unsupported:
            self._unsupported[key] = registry.unsupported(target, spec, shape)
        return self._unsupported[key]

    def runs(self, case, target) -> bool:
        return self.unsupported(target, case.spec, case.input.shape) is None

    def unsupported_records(self) -> list[dict]:
        """The ``unsupported`` records of this run's cases on its targets: one per target and
        reason, naming the cases. The run's cases are those with a result, and, where no -k or
        -m narrowed the run, those no target has a call for (with --shard, in shard 1)."""
        from reference import PoolSpec
        narrowed = self.config.option.keyword or self.config.option.markexpr
        if not narrowed and (self.shard is None or self.shard[0] == 1):
            from .check import case_fields
            for case in self.cases():
                if case.id not in self._case_fields and not any(self.runs(case, t) for t in self.targets):
                    self._case_fields[case.id] = {f: v for f, v in case_fields(case).items() if f != "case_id"}
                    if self._results_writer is not None:
                        self._results_writer.case({"case_id": case.id, **self._case_fields[case.id]})
        named: dict[tuple, list[str]] = {}
        for case_id, fields in self._case_fields.items():
            spec = PoolSpec.from_dict(fields["spec"])
            for target in self.targets:
                reason = self.unsupported(target, spec, fields["shape"])
                if reason is not None:
                    named.setdefault((target, reason), []).append(case_id)
        return [{"record": "unsupported", "run_id": self.run_id, "target": target.id, "reason": reason,
                 "framework_version": (self.frameworks_seen.get(target.framework, {}).get("version")
                                       or registry.installed_version(target.framework)),
                 "case_ids": case_ids}
                for (target, reason), case_ids in sorted(named.items(), key=lambda kv: (kv[0][0].id, kv[0][1]))]

    # -- execution -----------------------------------------------------------------------
    @property
    def runner(self) -> GroupRunner:
        if self._runner is None:
            from adapters.pool import ONE_THREAD_ENV, WorkerPool, compile_cache_env
            cache = options.compile_cache(self.config.getoption("compile_cache"))
            if cache is None:
                self._cold_cache = tempfile.TemporaryDirectory(prefix="poolgrad-cold-cache-")
                cache = self._cold_cache.name
            # One thread per framework worker: pytest-xdist already keeps every core busy, and
            # oversubscribed OpenMP pools make tiny pooling calls 50x slower.
            self._pool = WorkerPool(env={**ONE_THREAD_ENV, **compile_cache_env(cache)})
            self._runner = GroupRunner(self._pool, timeout_s=self.config.getoption("case_timeout"),
                                       repeat=self.config.getoption("repeat"))
            for params in filter(None, map(case_and_target, self.items)):
                self._runner.register(*params)
        return self._runner

    def describe(self, framework: str) -> dict:
        if framework not in self._described:
            self._described[framework] = self.runner.pool.describe(framework)
        return self._described[framework]

    def machine(self, framework: str) -> findings.Machine:
        return machine_of(framework, self.describe(framework).get("environment"))

    def mode_runner(self, mode: str):
        """The batched runner of one AD mode, its groups being that mode's collected tests."""
        if mode not in self._mode_runners:
            from .ad_modes import ModeRunner
            runner = ModeRunner(self.runner.pool, mode, timeout_s=self.config.getoption("case_timeout"))
            for item in self.items:
                if getattr(item, "originalname", None) == f"test_{mode}":
                    runner.register(item.callspec.params["mode_case"], item.callspec.params["mode_target"])
            self._mode_runners[mode] = runner
        return self._mode_runners[mode]

    def run_check(self, case, target, node, mode: str = "backward"):
        from . import check
        first_use = target.framework not in self._described
        info = self.describe(target.framework)
        if first_use:  # the controller learns versions and devices from the processes that ran them
            node.user_properties.append((FRAMEWORK_KEY, json.dumps({target.framework: info}, default=str)))
        start = time.perf_counter()
        runner = self.runner if mode == "backward" else self.mode_runner(mode)
        outcomes = runner.outcomes(case, target)
        checked = check.check(case, target, info.get("version") or "", outcomes, self.knowledge,
                              time.perf_counter() - start, self.machine(target.framework), mode)
        checked.record["run_id"] = self.run_id
        record = checked.record
        if case.id in self._sent_cases:
            record = {k: v for k, v in record.items() if k not in CASE_FIELDS}
        self._sent_cases.add(case.id)
        node.user_properties.append((RECORD_KEY, json.dumps(record, allow_nan=False)))
        return checked

    # -- results (controller only) -------------------------------------------------------
    def _open_results(self):
        path = self.config.getoption("results")
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._results_fh = open(path, "w")
            from reports.records import ResultsWriter
            self._results_writer = ResultsWriter(self._results_fh)
        if self.config.getoption("report_html") or self.config.getoption("report_markdown"):
            self._memory_records = []

    def collect(self, report) -> None:
        """Write the records a test report carries, as they arrive (controller side)."""
        for key, value in report.user_properties:
            if key == FRAMEWORK_KEY:
                self.frameworks_seen.update(json.loads(value))
            elif key == RECORD_KEY:
                rec = json.loads(value)
                if "input" in rec:
                    self._case_fields[rec["case_id"]] = {f: rec.get(f) for f in CASE_FIELDS}
                else:
                    rec.update(self._case_fields[rec["case_id"]])
                self.counts[(rec["outcome"], rec["verdict"])] = self.counts.get((rec["outcome"], rec["verdict"]), 0) + 1
                self.explaining.update(f["id"] for f in rec.get("findings") or ())
                for fid in rec.get("contradicts") or ():
                    self.contradicted[fid] = self.contradicted.get(fid, 0) + 1
                self._emit(rec)

    def _emit(self, rec: dict) -> None:
        if self._results_writer is not None:
            self._results_writer.write(rec)
        if self._memory_records is not None:
            if rec["record"] == "unsupported":
                from reports.records import unsupported_results
                self._memory_records.extend({**r, **self._case_fields[r["case_id"]]} for r in unsupported_results(rec))
            else:
                self._memory_records.append(rec)

    def environment_record(self) -> dict:
        frameworks = {}
        for name in registry.FRAMEWORKS:
            seen = self.frameworks_seen.get(name, {})
            version = seen.get("version") or registry.installed_version(name)
            if version:
                frameworks[name] = {"version": version, "devices": seen.get("devices", []),
                                    "environment": seen.get("environment", {})}
        return {
            "record": "environment", "schema": "poolgrad-results/1", "run_id": self.run_id,
            "shard": None if self.shard is None else f"{self.shard[0]}/{self.shard[1]}",
            "suite_version": _suite_version(), "suite_commit": _git_commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "numpy": np.__version__,
            "platform": platform.platform(), **machine_record(), "frameworks": frameworks,
            "env_switches": {k: os.environ[k] for k in ENV_SWITCHES if k in os.environ},
        }

    def finish(self) -> list[str]:
        """Close the results, write reports; returns lines for the terminal summary."""
        for rec in self.unsupported_records():
            key = ("skipped", "unsupported")
            self.counts[key] = self.counts.get(key, 0) + len(rec["case_ids"])
            self._emit(rec)
        env = self.environment_record()
        self._emit(env)
        lines = []
        if self._results_fh is not None:
            self._results_fh.close()
            lines.append(f"results: {self._results_fh.name}")
        if self._memory_records is not None:
            from reports import html, markdown
            if self.config.getoption("report_html"):
                html.write_html(self._memory_records, self.config.getoption("report_html"))
                lines.append(f"HTML report: {self.config.getoption('report_html')}")
            if self.config.getoption("report_markdown"):
                markdown.write_markdown(self._memory_records, self.config.getoption("report_markdown"))
                lines.append(f"Markdown summary: {self.config.getoption('report_markdown')}")
        return lines

    def stale_findings(self) -> list[str]:
        """Findings this run could have seen (their target, release and machine were selected
        and the catalogue ran) that explained nothing."""
        if self.config.getoption("case_file") or self.config.option.keyword or self.config.option.markexpr:
            return []  # a user's cases, or a selection, say nothing about what the catalogue covers
        env = self.environment_record()
        selected = {f.id for t in self.targets
                    if t.framework in env["frameworks"] and t.device in env["frameworks"][t.framework]["devices"]
                    for f in self.knowledge.for_target(
                        t.framework, t.variant, t.device, env["frameworks"][t.framework]["version"],
                        machine_of(t.framework, env["frameworks"][t.framework]["environment"]))}
        return [f.id for f in self.knowledge if f.id in selected and f.id not in self.explaining]

    def close(self):
        if self._pool is not None:
            self._pool.close()
        if self._cold_cache is not None:
            self._cold_cache.cleanup()


def _git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _suite_version():
    import importlib.metadata
    try:
        return importlib.metadata.version("poolgrad")
    except importlib.metadata.PackageNotFoundError:
        return "0+checkout"
