"""Run-level hooks: records travel from test reports to the results file, and the report and
summary are written at the end. Registered by conftest.py as an object holding the run."""

from __future__ import annotations

from .session import RunState


class ConformancePlugin:
    def __init__(self, state: RunState):
        self.state = state
        self.summary_lines: list[str] = []

    def pytest_runtest_logreport(self, report):
        # With xdist this runs in the controller, which receives the workers' reports.
        if self.state.is_controller and report.when == "call" and report.user_properties:
            self.state.collect(report)

    def pytest_sessionfinish(self, session):
        self.state.close()
        if self.state.is_controller:
            self.summary_lines = self.state.finish()

    def pytest_terminal_summary(self, terminalreporter):
        state = self.state
        if not state.is_controller or not state.counts:
            return
        tr = terminalreporter
        tr.section("poolgrad conformance")
        for (outcome, verdict), n in sorted(state.counts.items()):
            tr.write_line(f"{n:7d}  {outcome:18s} {verdict}")
        stale = state.stale_findings()
        if stale:
            tr.write_line(f"stale findings (in this run's targets, releases and machine, explained nothing): "
                          f"{', '.join(stale)}")
        if state.contradicted:
            tr.write_line("findings that did not hold where their scope says they apply (results in scope "
                          "that they do not explain): " + ", ".join(f"{k} ({n})" for k, n in sorted(state.contradicted.items())))
        for line in self.summary_lines:
            tr.write_line(line)


class XdistHooks:
    """Only registered when pytest-xdist is active (its hooks are unknown otherwise)."""

    def __init__(self, state: RunState):
        self.state = state

    def pytest_configure_node(self, node):
        node.workerinput["poolgrad_run_id"] = self.state.run_id
