"""suite/scheduling.py: work units keep batching groups whole and come heaviest first."""

import types

from adapters.base import Target
from cases import catalogue
from suite import scheduling
from suite.runner import group_key

COMPILE = Target("torch", "compile", "cpu")
EAGER = Target("torch", "eager", "cpu")


def _item(case, target):
    return types.SimpleNamespace(callspec=types.SimpleNamespace(params={"case": case, "target": target}),
                                 nodeid=f"{case.id}-{target.id}")


def test_every_batching_group_lies_in_one_unit():
    units_of_group: dict = {}
    for case in catalogue():
        units_of_group.setdefault(group_key(case), set()).add(scheduling.unit_name(case, COMPILE))
    assert units_of_group and all(len(units) == 1 for units in units_of_group.values())


def test_unit_cost_counts_each_batching_group_once():
    cases = [c for c in catalogue() if c.id.startswith("max_pool2d-")]
    per_item = scheduling._costs()["per_item"]
    assert abs(scheduling.unit_cost(COMPILE, cases[:1] * 10)
               - scheduling.unit_cost(COMPILE, cases[:1]) - 9 * per_item) < 1e-9
    assert scheduling.unit_cost(COMPILE, cases) > scheduling.unit_cost(EAGER, cases)


def _unit(item):
    return scheduling.unit_name(item.callspec.params["case"], item.callspec.params["target"])


def test_order_keeps_units_contiguous_heaviest_first_and_other_tests_last():
    cases = [c for c in catalogue() if c.id.startswith(("max_pool1d-", "avg_pool2d-"))]
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
    assert len({_unit(run[0]) for run in runs}) == len(runs) == 4  # each unit in one run
    costs = [scheduling.unit_cost(run[0].callspec.params["target"],
                                  [i.callspec.params["case"] for i in run]) for run in runs]
    assert costs == sorted(costs, reverse=True)
    assert _unit(runs[0][0]).startswith("torch-compile-cpu:")
    assert scheduling.order(list(items)) == ordered
