"""How the run is cut into pytest-xdist work units, and in what order they are handed out.

A unit is one batching group (one spec, dtype and shape: one framework call per target) on
every selected target, or where a selected target runs several groups as one call
(Framework.bundles) the groups of one such bundle (``units``). So no group or bundle is ever
split between processes (that would run, and compile, it twice), and the reference's results and policy searches of a case are computed
once per run and shared by every target that runs it (the unit's group, poolgrad/suite/call.py,
computes them on its cases stacked and keeps them while the unit's items, which come case by
case, are checked). Units are ordered heaviest first by the
cost model in poolgrad/suite/data/costs.toml (longest-processing-time scheduling), so the run ends on
short units instead of one worker finishing a compile-bound unit alone.
"""

from __future__ import annotations

import functools
import tomllib
import zlib
from pathlib import Path

from xdist.scheduler import LoadGroupScheduling

from poolgrad.adapters import registry
from poolgrad.cases.ids import geometry_tag

from .call import bundle_size, op_name
from .runner import case_and_target

COSTS_PATH = Path(__file__).parent / "data" / "costs.toml"


@functools.lru_cache(maxsize=1)
def _costs() -> dict:
    return tomllib.loads(COSTS_PATH.read_text())


def units(cases, targets=(), unsupported=lambda target, spec, shape: None) -> dict[str, str]:
    """case id -> the name of its work unit: its batching group's (unit_name), except where a
    target of ``targets`` runs several groups as one worker call (Framework.bundles): the groups
    such a target runs (``unsupported``: Run.unsupported) are cut, sorted by name, into bundles
    of that many, one unit each (``max_pool2d-k2s2-float16-c2+7``: the first and how many
    follow), so no bundle is split between processes. The same in every process."""
    names = {case.id: unit_name(case) for case in cases}
    sizes = [(t, n) for t in sorted(set(targets)) if (n := bundle_size(t)) > 1]
    if not sizes:
        return names
    size = min(n for _, n in sizes)
    joined = sorted({names[c.id] for c in cases
                     if any(unsupported(t, c.spec, c.input.shape) is None for t, _ in sizes)})
    bundle = {}
    for start in range(0, len(joined), size):
        chunk = joined[start:start + size]
        bundle.update(dict.fromkeys(chunk, chunk[0] if len(chunk) == 1 else f"{chunk[0]}+{len(chunk) - 1}"))
    return {case_id: bundle.get(name, name) for case_id, name in names.items()}


def unit_name(case) -> str:
    """The case's batching group, readably: ``max_pool2d-k3s1-float16-c2`` (a digest of the
    spec where a user's case has no geometry tag)."""
    try:
        tag = geometry_tag(case.spec, case.input.shape[2:])
    except ValueError:
        tag = f"{zlib.crc32(case.group_key[0].encode()):08x}"
    n, c = case.input.shape[:2]
    return f"{op_name(case)}-{tag}-{case.spec.dtype}-c{c}{'-empty' if n == 0 else ''}"


def unit_cost(targets, cases) -> float:
    """Seconds a unit takes: per item checked, plus per framework call (compilation) of each
    target; a target that bundles groups (Framework.bundles) makes one call of the unit's, each
    group costing its record's cost per bundled group."""
    costs = _costs()
    # Summed in a fixed order: a set's order follows string hashes, which differ between xdist
    # workers, and float sums in another order can differ in the last bit (and reorder units).
    calls = sum(_group_cost(t, costs["per_group"]) for t in sorted(set(targets)))
    return costs["per_item"] * len(cases) * len(set(targets)) + calls * len({c.group_key for c in cases})


def _group_cost(target, default: float) -> float:
    """A batching group's cost on ``target``: its framework record's (a framework's costs live
    in its package), else the default."""
    try:
        return registry.get(target.framework).costs.get(target.variant, default)
    except KeyError:
        return default


def order(items: list, checks=lambda case: (case,), names=None) -> list:
    """Conformance items regrouped unit by unit, heaviest unit first, case by case within a
    unit, then all other tests in their collected order. Deterministic, so every xdist worker
    collects the same list. ``checks(case)``: the cases an item of ``case`` checks (Run.checks);
    ``names``: case id -> unit (``units``), by default each case's batching group."""
    units: dict[str, list] = {}
    rest = []
    for item in items:
        params = case_and_target(item)
        if params is None:
            rest.append(item)
        else:
            case = params[0]
            units.setdefault(names[case.id] if names else unit_name(case), []).append(item)

    def cost(name):
        params = [case_and_target(i) for i in units[name]]
        checked = {id(d): d for c, _ in params for d in checks(c)}
        return unit_cost([t for _, t in params], list(checked.values()))
    ranked = sorted(units, key=lambda name: (-cost(name), name))
    out = []
    for name in ranked:
        by_case: dict[int, list] = {}
        for item in units[name]:
            by_case.setdefault(id(case_and_target(item)[0]), []).append(item)
        out += [item for run in by_case.values() for item in run]
    return out + rest


class UnitScheduling(LoadGroupScheduling):
    """pytest-xdist's loadgroup scheduling, by work unit, without its cost quadratic in the tests.

    A conformance test's unit is looked up by its test id, its parameters (``units``: test id ->
    unit name, Run.test_units, made from the same pairs as the tests), not read from an
    ``xdist_group`` mark: xdist appends a marked test's group to its node id, and so to every name
    JUnit XML and the terminal show (about 30 bytes per test). Other tests are units of their own.

    After each test, xdist counts a worker's pending tests over every unit the worker was ever
    given (under cProfile, 9 s of the controller's 16 s on 8,000 tests). A unit whose tests are
    all done is dropped from the worker's workload, so the count walks the units in progress;
    a finished unit has no pending test, so nothing that reads the workload changes.

    Handing a unit out, xdist finds each of its tests' positions in the worker's collection
    with ``list.index``: quadratic in the tests (20 s of the controller's time at ten draws of
    max_pool2d, 66,600 tests). The positions are looked up in a dict instead. Counting a unit's
    pending tests walks the unit, after each of its tests (quadratic in a unit's tests, which
    grow with the cases per spec): each unit in progress keeps its count instead."""

    def __init__(self, config, log=None, *, units=None):
        super().__init__(config, log)
        self._units = units
        self._scopes: dict[str, str] = {}
        self._positions: dict = {}  # node -> {test id: its index in the node's collection}
        # id of a unit handed out (its tests dict) -> [the dict, so the id stays its own; tests pending]
        self._pending: dict[int, list] = {}

    def _split_scope(self, nodeid: str) -> str:
        scope = self._scopes.get(nodeid)
        if scope is None:
            scope = self._scopes[nodeid] = self._unit_of(nodeid)
        return scope

    def _unit_of(self, nodeid: str) -> str:
        if callable(self._units):
            self._units = self._units()
        return self._units.get(nodeid.partition("[")[2][:-1], nodeid)

    def _assign_work_unit(self, node):
        scope, work_unit = self.workqueue.popitem(last=False)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        if node not in self._positions:
            self._positions[node] = {nodeid: i for i, nodeid in enumerate(self.registered_collections[node])}
        positions = self._positions[node]
        pending = [positions[nodeid] for nodeid, completed in work_unit.items() if not completed]
        self._pending[id(work_unit)] = [work_unit, len(pending)]
        node.send_runtest_some(pending)

    def mark_test_complete(self, node, item_index, duration=0):
        nodeid = self.registered_collections[node][item_index]
        workload = self.assigned_work[node]
        unit = self._split_scope(nodeid)
        tests = workload.get(unit)
        if tests is not None and tests.get(nodeid) is False and id(tests) in self._pending:
            self._pending[id(tests)][1] -= 1
        super().mark_test_complete(node, item_index, duration)
        if tests is not None and self._pending_in(tests) == 0:
            del workload[unit]
            self._pending.pop(id(tests), None)

    def _pending_in(self, tests: dict) -> int:
        entry = self._pending.get(id(tests))
        return list(tests.values()).count(False) if entry is None else entry[1]

    def _pending_of(self, workload):
        return sum(self._pending_in(tests) for tests in workload.values())
