"""A run's results, in the controller: the records that test reports carry, written to the
results file as they arrive, the ``unsupported`` records of pairs that were no test item, the
environment record, the counts and findings for the terminal summary, and the reports."""

from __future__ import annotations

import collections
import datetime
import json
import os
import platform
import subprocess
from pathlib import Path

import numpy as np

from poolgrad.adapters import registry
from poolgrad.reports.schema import CASE_FIELDS

from .execution import FRAMEWORK_KEY, RECORD_KEY
from .machine import machine as machine_of, record as machine_record
from .run import Run

def env_switches() -> tuple[str, ...]:
    """Environment switches known to change pooling (each framework record's); only these are
    recorded."""
    return tuple(dict.fromkeys(k for fw in registry.FRAMEWORKS.values() for k in fw.env_switches))


class Results:
    def __init__(self, run: Run):
        self.run = run
        self.frameworks_seen: dict[str, dict] = {}
        self.counts: dict[tuple[str, str], int] = {}
        self.explaining = collections.Counter()   # finding -> results it explained
        self.contradicted: dict[str, int] = {}    # finding -> results in scope it did not explain
        self._case_fields: dict[str, dict] = {}   # the cases met, without their ids
        self._results_fh = None
        self._results_writer = None
        self._memory_records: list[dict] | None = None
        config = run.config
        path = self._results_path = config.getoption("results")
        if path:
            from poolgrad.reports.records import ResultsWriter, open_results
            self._results_fh = open_results(path)
            self._results_writer = ResultsWriter(self._results_fh)
            # What is known before any worker ran (the machine, the installed releases), so a run
            # killed early keeps its machine facts; finish() writes it again, completed with what
            # the workers reported, and readers keep a run's last one (records.split).
            self._results_writer.write(self.environment_record())
        if config.getoption("report_html") or config.getoption("report_markdown"):
            self._memory_records = []

    def collect(self, properties) -> None:
        """Write the records a call report carries, as they arrive (``properties``: its
        user properties, records decoded)."""
        for key, value in properties:
            if key == FRAMEWORK_KEY:
                self.frameworks_seen.update(json.loads(value))
            elif key == RECORD_KEY:
                rec = value  # against its case (records.against_case), as the file holds it
                if "input" in rec:
                    self._case_fields[rec["case_id"]] = {f: rec.get(f) for f in CASE_FIELDS}
                self._count(rec["outcome"], rec["verdict"])
                self.explaining.update(f["id"] for f in rec.get("findings") or ())
                for fid in rec.get("contradicts") or ():
                    self.contradicted[fid] = self.contradicted.get(fid, 0) + 1
                self._emit(rec)

    def _count(self, outcome: str, verdict: str, n: int = 1) -> None:
        self.counts[(outcome, verdict)] = self.counts.get((outcome, verdict), 0) + n

    def _emit(self, rec: dict) -> None:
        if self._results_writer is not None:
            self._results_writer.write(rec)
        if self._memory_records is not None:
            if rec["record"] == "unsupported":
                from poolgrad.reports.records import unsupported_results
                self._memory_records.extend({**r, **self._case_fields[r["case_id"]]} for r in unsupported_results(rec))
            elif rec["record"] == "result":
                from poolgrad.reports.records import restore
                self._memory_records.append(restore(rec, self._case_fields[rec["case_id"]]))
            else:
                self._memory_records.append(rec)

    def unsupported_records(self) -> list[dict]:
        """The ``unsupported`` records of this run's cases on its targets: one per target and
        reason, naming the cases. The run's cases are those with a result, and, where cases ran
        and no -k or -m narrowed the run, those no target has a call for (with --shard, in
        shard 1)."""
        from poolgrad.reference import PoolSpec
        run = self.run
        if self._case_fields and not run.narrowed and (run.shard is None or run.shard[0] == 1):
            from .check import case_fields
            for case in run.cases():
                if case.id not in self._case_fields and not any(run.runs(case, t) for t in run.targets):
                    fields = case_fields(case)
                    self._case_fields[case.id] = {f: fields[f] for f in CASE_FIELDS}
                    if self._results_writer is not None:
                        self._results_writer.case(fields)
        named: dict[tuple, list[str]] = {}
        for case_id, fields in self._case_fields.items():
            spec = PoolSpec.from_dict(fields["spec"])
            for target in run.targets:
                reason = run.unsupported(target, spec, fields["shape"])
                if reason is not None:
                    named.setdefault((target, reason), []).append(case_id)
        return [{"record": "unsupported", "run_id": run.run_id, "target": target.id, "reason": reason,
                 "verdict": "not_run" if run.not_run(reason) else "unsupported",
                 "framework_version": (self.frameworks_seen.get(target.framework, {}).get("version")
                                       or registry.installed_version(target.framework)),
                 "case_ids": case_ids}
                for (target, reason), case_ids in sorted(named.items(), key=lambda kv: (kv[0][0].id, kv[0][1]))]

    def environment_record(self) -> dict:
        # What its adapter reported; readers add the run's env_switches it reads (Framework.environment_in).
        frameworks = {}
        for name in registry.FRAMEWORKS:
            seen = self.frameworks_seen.get(name, {})
            version = seen.get("version") or registry.installed_version(name)
            if version:
                frameworks[name] = {"version": version, "devices": seen.get("devices", []),
                                    "environment": seen.get("environment", {})}
        shard = self.run.shard
        return {
            "record": "environment", "schema": "poolgrad-results/1", "run_id": self.run.run_id,
            "shard": None if shard is None else f"{shard[0]}/{shard[1]}",
            "suite_version": _suite_version(), "suite_commit": _git_commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "python": platform.python_version(), "numpy": np.__version__,
            "platform": platform.platform(), **machine_record(), "frameworks": frameworks,
            "env_switches": {k: os.environ[k] for k in env_switches() if k in os.environ},
        }

    def finish(self) -> list[str]:
        """Close the results, write reports; returns lines for the terminal summary."""
        for rec in self.unsupported_records():
            self._count("skipped", rec["verdict"], len(rec["case_ids"]))
            self._emit(rec)
        self._emit(self.environment_record())
        lines = []
        if self._results_fh is not None:
            self._results_fh.close()
            lines.append(f"results: {self._results_path}")
        if self._memory_records is not None:
            from poolgrad.reports import html, markdown
            config = self.run.config
            if config.getoption("report_html"):
                html.write_html(self._memory_records, config.getoption("report_html"))
                lines.append(f"HTML report: {config.getoption('report_html')}")
            if config.getoption("report_markdown"):
                markdown.write_markdown(self._memory_records, config.getoption("report_markdown"))
                lines.append(f"Markdown summary: {config.getoption('report_markdown')}")
        return lines

    def stale_findings(self) -> list[str]:
        """Findings this run could have seen (their target, release and machine were selected
        and the catalogue ran) that explained nothing."""
        run = self.run
        if run.config.getoption("case_file") or run.narrowed:
            return []  # a user's cases, or a selection, say nothing about what the catalogue covers
        env = self.environment_record()
        selected = {f.id for t in run.targets
                    if t.framework in env["frameworks"] and t.device in env["frameworks"][t.framework]["devices"]
                    for f in run.knowledge.for_target(
                        t.framework, t.variant, t.device, env["frameworks"][t.framework]["version"],
                        machine_of(t.framework, env["frameworks"][t.framework]["environment"]))}
        return [f.id for f in run.knowledge if f.id in selected and f.id not in self.explaining]


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
