"""Run-level hooks: records travel from test reports to the results file, and the report and
summary are written at the end. Registered by poolgrad/plugin.py as an object holding the run."""

from __future__ import annotations

import collections
import functools
import json
from pathlib import PurePosixPath

import pytest
from _pytest.junitxml import xml_key

from poolgrad.knowledge.impacts import IMPACT_RANK

from .execution import FRAMEWORK_KEY, RECORD_KEY, Execution
from .results import Results
from .run import FREEZE_EVERY, Run, freeze_survivors, long_lived, restore_collector, test_id
from .runner import case_and_target


class ConformancePlugin:
    def __init__(self, run: Run, execution: Execution, results: Results | None):
        """``results``: the controller's (None in an xdist worker)."""
        self.run, self.execution, self.results = run, execution, results
        self.summary_lines: list[str] = []
        self._reduced: dict[str, list] = {}  # nodeid -> the call report's properties, reduced
        self._finished = 0

    def pytest_generate_tests(self, metafunc):
        """test_jvp / test_double_backward: the (case, target) pairs the AD modes check."""
        if "mode_case" in metafunc.fixturenames and "mode_target" in metafunc.fixturenames:
            from .ad_modes import selected
            pairs = selected(self.run.tests(), self.run.targets, metafunc.config.getoption("ad_modes"),
                             metafunc.function.__name__.removeprefix("test_"))
            metafunc.parametrize(["mode_case", "mode_target"], [
                pytest.param(c, t, id=test_id(c, t)) for c, t in pairs if self.run.runs(c, t)])

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session):
        with long_lived():
            result = yield
        if any(_in_conformance(item.nodeid) for item in session.items):
            freeze_survivors()  # full passes from the first test on (xdist's controller collects nothing)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        # The record travels with the call report only: the teardown report (which copies the
        # item's properties, and which xdist sends to the controller too) would carry the
        # arrays a second time.
        report = yield
        if call.when == "call":
            item.user_properties[:] = [(k, v) for k, v in item.user_properties if k != RECORD_KEY]
            if report.skipped and isinstance(report.longrepr, tuple) and case_and_target(item):
                # pytest.skip's location is the absolute path of this checkout or install, which
                # JUnit XML writes on every skipped test: the test's own file, as its id names it.
                report.longrepr = (item.nodeid.split("::")[0], *report.longrepr[1:])
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report):
        # With xdist this runs in the controller, which receives the workers' reports.
        if not self.results:
            return
        if report.when == "setup":
            self._junit_classname(report)
        # The record (arrays and all) goes to the results file; what other reporters keep of it
        # (JUnit XML writes the teardown report's properties) is the verdict, not the arrays, and
        # nothing where the test's outcome says it all (it conforms, or it is skipped, the
        # skip naming why); nor the framework's description a process sends with its first
        # test (the results' environment record has it). The call report carries the record;
        # the teardown report (which JUnit XML writes) gets the call report's reduction.
        if report.when == "call" and report.user_properties:
            properties = [(k, json.loads(v) if k == RECORD_KEY else v) for k, v in report.user_properties]
            self.results.collect(properties)
            draws = sum(k == RECORD_KEY for k, _ in properties) > 1  # a case's draws: name each
            report.user_properties = self._reduced[report.nodeid] = [
                (VERDICT_KEY, _verdict_of(v, draws)) if k == RECORD_KEY else (k, v)
                for k, v in properties if not (k == RECORD_KEY and _says_nothing(v) or k == FRAMEWORK_KEY)]
        elif report.when == "teardown" and report.nodeid in self._reduced:
            report.user_properties = self._reduced.pop(report.nodeid)

    def pytest_runtest_logfinish(self, nodeid):
        # In xdist's controller too, for every worker's test: it keeps every report. Only a
        # conformance run's tests count: another project's tests keep the collector as it is.
        if _in_conformance(nodeid):
            self._finished += 1
            if self._finished % FREEZE_EVERY == 0:
                freeze_survivors()

    def _junit_classname(self, report):
        """Conformance tests get the JUnit classname ``poolgrad``: pytest derives it from the
        module's path (``poolgrad.conformance.test_conformance`` in a checkout, a path through
        site-packages when installed), which differs by install and is most of the bytes of a
        passing test's entry; the test name (the test id) is the same everywhere."""
        xml = self.run.config.stash.get(xml_key, None)
        if xml is not None and _in_conformance(report.nodeid):
            # LogXML keeps attributes set before it opens the entry over its own (as
            # record_xml_attribute does, which xdist workers cannot reach).
            xml.node_reporter(report).add_attribute("classname", JUNIT_CLASSNAME)

    def pytest_sessionfinish(self, session):
        restore_collector()
        self.execution.close()
        if self.results:
            self.summary_lines = self.results.finish()

    def pytest_terminal_summary(self, terminalreporter, config):
        state = self.results
        if not state or not state.counts:
            return
        tr = terminalreporter
        tr.section("poolgrad conformance")
        for line in summary(state.counts, state.explaining, self.run.knowledge, self.run.targets,
                            all_findings=config.option.verbose > 0):
            tr.write_line(line)
        if config.getoption("audit_findings"):
            tr.write_line("knowledge-base audit:")
            stale = state.stale_findings()
            tr.write_line("  stale (in this run's targets, releases and machine, explained nothing): "
                          + (", ".join(stale) or "none"))
            tr.write_line("  did not hold where their scope says they apply (results in scope that they do not "
                          "explain): " + (", ".join(f"{k} ({n})" for k, n in sorted(state.contradicted.items())) or "none"))
        for line in self.summary_lines:
            tr.write_line(line)


# Findings the summary names by default; -v names every one.
SUMMARY_FINDINGS = 15


def summary(counts: dict, explaining: dict, knowledge, targets, all_findings: bool = False) -> list[str]:
    """What a run found, for the person who ran it: its results (conforming, known behaviours,
    unexplained), what was skipped and why, then the findings its results hit, worst impact
    first, each with its result count. ``counts``: (outcome, verdict) -> results;
    ``explaining``: finding id -> results it explained."""
    by_outcome = collections.Counter()
    for (outcome, _), n in counts.items():
        by_outcome[outcome] += n
    frameworks = ", ".join(dict.fromkeys(t.framework for t in targets)) or "no framework"
    ran = sum(n for outcome, n in by_outcome.items() if outcome != "skipped")
    unexplained = by_outcome["fail"] + by_outcome["behaviour_changed"]
    lines = [f"results on {frameworks}: {ran} (conform to the spec: {by_outcome['pass']}, known behaviours, "
             f"explained by findings: {by_outcome['expected']}, unexplained: {unexplained})"]
    if unexplained:
        lines.append(f"  unexplained: {by_outcome['fail']} differ from the spec with no finding to explain them, "
                     f"{by_outcome['behaviour_changed']} differ from what their finding says; each failed test "
                     f"above names its case and the command that reruns it")
    skipped = sorted(((n, verdict) for (outcome, verdict), n in counts.items() if outcome == "skipped"), reverse=True)
    if skipped:
        lines.append(f"skipped: {sum(n for n, _ in skipped)} (" + ", ".join(f"{verdict}: {n}" for n, verdict in skipped) + ")")
    by_id = {f.id: f for f in knowledge}
    hit = sorted(explaining.items(), key=lambda kv: (-IMPACT_RANK.get(by_id[kv[0]].impact, -1), -kv[1], kv[0]))
    if hit:
        lines.append(f"findings hit: {len(hit)}, worst impact first (results, impact, finding: title):")
        shown = hit if all_findings else hit[:SUMMARY_FINDINGS]
        for fid, n in shown:
            lines.append(f"  {n:6d}  {by_id[fid].impact or '-':18s} {fid}: {by_id[fid].title}")
        if len(shown) < len(hit):
            lines.append(f"  and {len(hit) - len(shown)} more (-v lists every one)")
    return lines


JUNIT_CLASSNAME = "poolgrad"
CONFORMANCE_PACKAGE = ("poolgrad", "conformance")

# What other reporters (JUnit XML) keep of a record: "outcome verdict finding,finding",
# e.g. "expected policy FINDING-ID".
VERDICT_KEY = "poolgrad"


@functools.lru_cache(maxsize=64)
def _in_conformance_file(path: str) -> bool:
    return PurePosixPath(path).parent.parts[-2:] == CONFORMANCE_PACKAGE


def _in_conformance(nodeid: str) -> bool:
    """A test of poolgrad/conformance (in a checkout or installed)."""
    return _in_conformance_file(nodeid.split("::")[0])


def _says_nothing(rec: dict) -> bool:
    return rec["outcome"] == "skipped" or (rec["outcome"], rec["verdict"]) == ("pass", "conforms")


def _verdict_of(rec: dict, named: bool = False) -> str:
    verdict = " ".join(filter(None, (rec["outcome"], rec["verdict"], ",".join(f["id"] for f in rec.get("findings") or ()))))
    return f"{rec['case_id']}: {verdict}" if named else verdict


class XdistHooks:
    """Only registered when pytest-xdist is active (its hooks are unknown otherwise)."""

    def __init__(self, run: Run):
        self.run = run

    def pytest_configure_node(self, node):
        node.workerinput["poolgrad_run_id"] = self.run.run_id

    def pytest_xdist_make_scheduler(self, config, log):
        if config.option.dist == "loadgroup":
            from . import scheduling
            # The catalogue is loaded when the first collection arrives, not before the workers start.
            return scheduling.UnitScheduling(config, log, units=self.run.test_units)
        return None
