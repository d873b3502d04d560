"""poolgrad/suite/scheduling.py: work units keep batching groups whole and come heaviest first."""

import dataclasses
import os
import subprocess
import sys
import types

from poolgrad.adapters.base import Target
from poolgrad.cases import catalogue
from poolgrad.suite import scheduling

COMPILE = Target("torch", "compile", "cpu")
EAGER = Target("torch", "eager", "cpu")


def _item(case, target):
    return types.SimpleNamespace(callspec=types.SimpleNamespace(params={"case": case, "target": target}),
                                 nodeid=f"{case.id}-{target.id}")


def test_every_batching_group_lies_in_one_unit():
    units_of_group: dict = {}
    for case in catalogue():
        units_of_group.setdefault(case.group_key, set()).add(scheduling.unit_name(case))
    assert units_of_group and all(len(units) == 1 for units in units_of_group.values())


def test_unit_cost_counts_each_batching_group_once():
    cases = [c for c in catalogue() if c.id.startswith("max_pool2d-")]
    per_item = scheduling._costs()["per_item"]
    assert abs(scheduling.unit_cost([COMPILE], cases[:1] * 10)
               - scheduling.unit_cost([COMPILE], cases[:1]) - 9 * per_item) < 1e-9
    assert scheduling.unit_cost([COMPILE], cases) > scheduling.unit_cost([EAGER], cases)
    assert scheduling.unit_cost([COMPILE, EAGER], cases) > scheduling.unit_cost([COMPILE], cases)


def _unit(item):
    return scheduling.unit_name(item.callspec.params["case"])


def test_order_keeps_units_contiguous_heaviest_first_and_other_tests_last():
    cases = [c for c in catalogue() if c.id.startswith(("max_pool1d-k2s2-", "avg_pool2d-k3s2p1-")) and c.family != "large_nc"]
    other = types.SimpleNamespace(nodeid="tests/reference/test_x.py::test_y")
    items = [other] + [_item(c, t) for c in cases for t in (EAGER, COMPILE)]
    ordered = scheduling.order(items)
    assert sorted(map(id, ordered)) == sorted(map(id, items))
    assert ordered[-1] is other
    runs: list[list] = []
    for item in ordered[:-1]:
        if runs and _unit(runs[-1][0]) == _unit(item):
            runs[-1].append(item)
        else:
            runs.append([item])
    assert len({_unit(run[0]) for run in runs}) == len(runs) == len({c.group_key for c in cases})
    costs = [scheduling.unit_cost([i.callspec.params["target"] for i in run],
                                  list({id(i.callspec.params["case"]): i.callspec.params["case"] for i in run}.values()))
             for run in runs]
    assert costs == sorted(costs, reverse=True)
    for run in runs:  # case by case: every target of a case before the next case
        seen = [i.callspec.params["case"].id for i in run]
        assert seen == sorted(seen, key=seen.index) and all(seen.count(s) == 2 for s in seen)
        assert [s for i, s in enumerate(seen) if i % 2 == 0] == list(dict.fromkeys(seen))
    assert scheduling.order(list(items)) == ordered


def test_order_is_the_same_whatever_the_string_hashes():
    """xdist workers collect with different string hash seeds and must order alike."""
    code = ("from poolgrad.suite import scheduling; from poolgrad.cases import catalogue; from poolgrad.adapters import registry; "
            "ts, cs = registry.all_targets(), catalogue()[:3]; "
            "print([scheduling.unit_cost(ts[i:], cs).hex() for i in range(len(ts))])")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(outs) == 1, outs


class _Node:
    """A stand-in xdist worker: records the test indexes it is sent."""

    def __init__(self, name):
        self.gateway = types.SimpleNamespace(id=name)
        self.sent, self.shutting_down = [], False

    def send_runtest_some(self, indexes):
        self.sent += indexes

    def shutdown(self):
        self.shutting_down = True


def test_unit_scheduling_drops_finished_units_and_runs_every_test_once():
    config = types.SimpleNamespace(getvalue=lambda name: ["2*popen"], option=types.SimpleNamespace(loadscopereorder=False))
    # Cases u.i of unit u, each on two targets (one id ends the other), and a test of no unit.
    cases = {f"case{u}.{i}": f"unit{u}" for u in range(6) for i in range(4)}
    units = {f"{case}-{target}": unit for case, unit in cases.items() for target in ("torch-eager-cpu", "eager-cpu")}
    sched = scheduling.UnitScheduling(config, units=lambda: units)
    collection = [f"t.py::test_backward[{test}]" for test in units] + ["t.py::test_other[x]"]
    assert [sched._split_scope(n) for n in collection[:3]] == ["unit0"] * 3
    assert sched._split_scope(collection[-1]) == collection[-1]
    nodes = [_Node("gw0"), _Node("gw1")]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    done, node_of_unit = [], {}
    while any(node.sent for node in nodes):
        for node in nodes:
            if node.sent:
                index = node.sent.pop(0)
                done.append(collection[index])
                # a unit's tests all go to one worker
                assert node_of_unit.setdefault(sched._split_scope(collection[index]), node) is node
                sched.mark_test_complete(node, index)
                # the worker's workload holds only units with a test still to run, and its
                # pending count (kept per unit) is what its tests say
                workload = sched.assigned_work[node]
                assert all(False in unit.values() for unit in workload.values())
                assert sched._pending_of(workload) == sum(list(u.values()).count(False) for u in workload.values())
    assert sorted(done) == sorted(collection) and sched.tests_finished and not sched.has_pending


def test_unit_scheduling_hands_a_crashed_workers_pending_tests_to_another():
    config = types.SimpleNamespace(getvalue=lambda name: ["2*popen"], option=types.SimpleNamespace(loadscopereorder=False))
    units = {f"case{u}.{i}-eager-cpu": f"unit{u}" for u in range(4) for i in range(3)}
    sched = scheduling.UnitScheduling(config, units=lambda: units)
    collection = [f"t.py::test_backward[{test}]" for test in units]
    gw0, gw1 = _Node("gw0"), _Node("gw1")
    for node in (gw0, gw1):
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    first = gw0.sent.pop(0)
    sched.mark_test_complete(gw0, first)
    crashed = collection[gw0.sent[0]]
    assert sched.remove_node(gw0) == crashed  # its unit's other tests go back in the queue
    done = [collection[first]]
    while gw1.sent:
        index = gw1.sent.pop(0)
        done.append(collection[index])
        sched.mark_test_complete(gw1, index)
    assert sorted(done) == sorted(collection) and sched.tests_finished and not sched.has_pending


def test_a_units_cost_counts_the_draws_its_items_check():
    """Two units of one target, the lighter one with many draws per case: it comes first."""
    one = [c for c in catalogue() if c.id.startswith("max_pool1d-k2s2-") and c.spec.dtype == "float32"][:2]
    two = [c for c in catalogue() if c.id.startswith("avg_pool2d-k3s2p1-") and c.spec.dtype == "float32"][:4]
    assert scheduling.unit_cost([EAGER], one) < scheduling.unit_cost([EAGER], two)
    items = [_item(c, EAGER) for c in one + two]
    assert [_unit(i) for i in scheduling.order(items)][0] == _unit(items[-1])
    draws = [dataclasses.replace(one[0], id=f"{one[0].id}~{k}") for k in range(1, 1000)]
    ordered = scheduling.order(items, lambda case: (case, *draws) if case is one[0] else (case,))
    assert [_unit(i) for i in ordered][0] == _unit(items[0])



def test_plain_n_schedules_by_unit_whatever_order_the_plugins_registered_in():
    """`python -m pytest -n 2` in a checkout finds poolgrad's entry point first (the editable
    install's egg-info beside sys.path[0]): a tryfirst hook then ran after xdist's, which had set
    --dist load, and groups were split between the processes (compiled twice)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider",
                           "--frameworks", "torch", "-k", "max_pool1d-k2s2-ties_window-2-float32-torch-eager",
                           "poolgrad/conformance"], cwd=root, capture_output=True, text=True, timeout=300)
    assert "scheduling tests via UnitScheduling" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
