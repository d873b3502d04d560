"""--shard I/N: a deterministic partition of the collected tests.

Whole batching groups (framework, spec, dtype, spatial shape) go to one shard, so sharding
never multiplies compilations; groups are dealt largest first to the least-loaded shard.
"""

from __future__ import annotations

from .runner import case_and_target


def _key(item):
    params = case_and_target(item)
    if params is None:
        return ("", item.nodeid)
    case, target = params
    return (target.framework, repr(case.group_key))


def select(items, index: int, count: int):
    groups: dict[tuple, list] = {}
    for item in items:
        groups.setdefault(_key(item), []).append(item)
    loads = [0] * count
    owner = {}
    for key in sorted(groups, key=lambda k: (-len(groups[k]), k)):
        shard = min(range(count), key=lambda s: (loads[s], s))
        owner[key] = shard
        loads[shard] += len(groups[key])
    return [item for item in items if owner[_key(item)] == index - 1]
