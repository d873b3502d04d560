"""What a run makes to keep (cases, test items) is made with the cyclic collector off and then
frozen; the collector is on again afterwards, whatever happened while making it. During the
run, full collections follow the conformance tests (every FREEZE_EVERY of them), and what
the reference caches drop is freed without them."""

from __future__ import annotations

import gc
import weakref

import pytest

from poolgrad.cases.catalogue import catalogue
from poolgrad.suite import plugin as suite_plugin, run
from poolgrad.suite.call import Group
from poolgrad.suite.run import freeze_survivors, long_lived, restore_collector


def test_the_collector_is_off_while_making_and_on_again_after_an_error():
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with long_lived():
            assert not gc.isenabled()
            kept = [[i] for i in range(1000)]
            raise ValueError("collection failed")
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(kept)


def test_a_collector_the_user_turned_off_stays_off(monkeypatch):
    monkeypatch.setattr(run, "_own_schedule", [])  # not what this process's own run replaced
    threshold = gc.get_threshold()
    gc.disable()
    try:
        with long_lived():
            pass
        freeze_survivors()
        assert not gc.isenabled() and gc.get_threshold() == threshold and not run._own_schedule
    finally:
        gc.enable()


def test_full_collections_follow_conformance_tests_only(monkeypatch):
    passes = []
    monkeypatch.setattr(suite_plugin, "FREEZE_EVERY", 2)
    monkeypatch.setattr(suite_plugin, "freeze_survivors", lambda: passes.append(1))
    plugin = suite_plugin.ConformancePlugin(run=None, execution=None, results=None)
    for _ in range(5):
        plugin.pytest_runtest_logfinish("tests/test_other.py::test_x")
    assert passes == []
    for _ in range(5):
        plugin.pytest_runtest_logfinish("site/poolgrad/conformance/test_conformance.py::test_backward[k2s2-torch]")
    assert len(passes) == 2


def test_after_a_freeze_full_passes_are_left_to_the_next_until_the_run_ends(monkeypatch):
    monkeypatch.setattr(run, "_own_schedule", [])  # not what this process's own run replaced
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        freeze_survivors()
        freeze_survivors()
        assert gc.get_threshold() == (700, 10, 1 << 30)
        restore_collector()
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_a_groups_references_are_freed_without_the_cycle_collector():
    case = next(c for c in catalogue() if c.spec.is_max)
    group = Group([case])
    ref = group.reference(case)
    for policy in ref.candidates()[:4]:  # results whose validity refers back to the stack
        ref.result(policy).valid()
    stack = weakref.ref(ref._stack)
    del ref
    gc.disable()
    try:
        group.done()  # the group's last check: its references go
        assert stack() is None
    finally:
        gc.enable()