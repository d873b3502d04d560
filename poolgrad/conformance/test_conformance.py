"""The conformance suite: every case of the catalogue (or --case-file) on every selected
target, classified against the reference (the spec) and judged by the knowledge base (the
findings of each framework path): one test per case and target, its draws checked inside it."""

import pytest

from poolgrad.adapters import registry
from poolgrad.suite.options import gpu_driver_present, rerun_command


def test_backward(case, target, poolgrad, request):
    """Forward and gradient of ``case`` (and of its draws) on ``target`` agree with the spec, or
    with the findings in scope for this target (the knowledge base)."""
    _conclude(poolgrad.run_check(case, target, request.node), target, request)


def test_jvp(mode_case, mode_target, poolgrad, request):
    """Forward mode (JVP) of ``mode_case`` on ``mode_target`` agrees with the spec under the
    reverse mode's own policy (SPEC.md, "AD modes"), or with a listed finding."""
    _conclude(poolgrad.run_check(mode_case, mode_target, request.node, "jvp"), mode_target, request)


def test_double_backward(mode_case, mode_target, poolgrad, request):
    """The gradient of sum(dX * v) by grad_output and by the input agrees with the spec and with
    the reverse mode of the same call, or with a listed finding."""
    _conclude(poolgrad.run_check(mode_case, mode_target, request.node, "double_backward"), mode_target, request)


def _conclude(checks, target, request):
    """One conclusion for a case and its draws: it fails where any of them fails (each named,
    then the command that reruns this test alone), and is skipped where all of them are. A
    known behaviour fails too where its impact is --fail-on's or worse."""
    fail_on = request.config.getoption("fail_on")
    failed = [c for c in checks if c.fails(fail_on)]
    if failed:
        rerun = rerun_command(request.config, request.node.name, target)
        pytest.fail("\n".join([*(f"{c.record['case_id']} on {target.id}: {c.message}"
                                  + (f", which fails under --fail-on {fail_on}" if c.outcome == "expected" else "") for c in failed),
                               f"rerun: {rerun}"]), pytrace=False)
    if all(c.outcome == "skipped" for c in checks):
        pytest.skip(checks[0].message)
    assert all(c.outcome in ("pass", "expected", "skipped") for c in checks), [c.outcome for c in checks]


def test_framework_installed(installable_framework):
    """One visible line per framework that is not installed: its targets are not run."""
    if not registry.installed(installable_framework):
        pytest.skip(f"{installable_framework} is not installed; its targets are skipped")
    assert registry.installed_version(installable_framework)


def test_gpu_present(poolgrad):
    """One visible line when no GPU is present: gpu targets are not run."""
    if not gpu_driver_present():
        pytest.skip("no GPU driver found on this machine; gpu targets are skipped (pass --devices gpu to force them)")
    assert any(t.device == "gpu" for t in poolgrad.run.targets) or poolgrad.run.config.getoption("devices")
