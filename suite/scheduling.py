"""How the run is cut into pytest-xdist work units, and in what order they are handed out.

A unit is one target's cases of one op (``torch-compile-cpu:max_pool2d``): it holds whole
batching groups, so no group is ever split between processes (that would run, and compile,
it twice), and it is small enough that two workers share even one heavy variant. Units are
ordered heaviest first by the cost model in suite/data/costs.toml (longest-processing-time
scheduling): the run ends on short units instead of one worker finishing a compile-bound
unit alone. A process starts a framework's worker only when it first receives one of that
framework's units.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

from .check import op_name
from .runner import case_and_target, group_key

COSTS_PATH = Path(__file__).parent / "data" / "costs.toml"


@functools.lru_cache(maxsize=1)
def _costs() -> dict:
    return tomllib.loads(COSTS_PATH.read_text())


def unit_name(case, target) -> str:
    return f"{target.id}:{op_name(case)}"


def unit_cost(target, cases) -> float:
    costs = _costs()
    per_group = costs["per_group"]
    group_s = per_group.get(f"{target.framework}-{target.variant}", per_group["default"])
    groups = {group_key(c) for c in cases}
    return costs["per_item"] * len(cases) + group_s * len(groups)


def order(items: list) -> list:
    """Conformance items regrouped unit by unit, heaviest unit first, then all other tests in
    their collected order. Deterministic, so every xdist worker collects the same list."""
    units: dict[str, list] = {}
    rest = []
    for item in items:
        params = case_and_target(item)
        if params is None:
            rest.append(item)
        else:
            units.setdefault(unit_name(*params), []).append(item)
    def cost(name):
        members = units[name]
        return unit_cost(case_and_target(members[0])[1], [case_and_target(i)[0] for i in members])
    ranked = sorted(units, key=lambda name: (-cost(name), name))
    return [item for name in ranked for item in units[name]] + rest
