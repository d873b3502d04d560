"""Merge results from shards, machines and framework versions into one canonical file.

A *lane* is one environment: the same machine, suite and versions (see ``lane_of``). Shards of
one run, and the unsharded run itself, land in the same lane whatever their process run ids,
so their merged output is byte-identical: run ids are replaced by the lane id, environment
records of a lane become one (shard null, earliest date, devices united), and results are
sorted by (framework, version, variant, device, case, lane). Identical (lane, case, target)
records collapse to one; if they differ (a re-run shard), the smallest canonical JSON wins so
the choice does not depend on argument order, and the conflict is counted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from .records import ResultsWriter, dumps, open_results
from .schema import case_label

# Environment fields that identify a lane; shard, date and run_id describe one process only.
_LANE_FIELDS = ("suite_version", "suite_commit", "python", "numpy", "platform", "cpu", "env_switches")


def lane_of(env: dict) -> str:
    identity = {k: env[k] for k in _LANE_FIELDS}
    identity["frameworks"] = {name: fw.get("version") for name, fw in env["frameworks"].items()}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return f"lane-{digest[:12]}"


def _merge_lane(lane: str, envs: list[dict]) -> dict:
    """One environment record for a lane's processes (deterministic in their order)."""
    envs = sorted(envs, key=dumps)
    merged = {**envs[0], "run_id": lane, "shard": None, "date": min(e["date"] for e in envs)}
    frameworks = {}
    for name in sorted({n for e in envs for n in e["frameworks"]}):
        seen = [e["frameworks"][name] for e in envs if name in e["frameworks"]]
        # Shards that never ran a framework know its version but not its devices or details.
        frameworks[name] = {
            "version": seen[0].get("version"),
            "devices": sorted({d for fw in seen for d in fw.get("devices", [])}),
            "environment": next((fw["environment"] for fw in seen if fw.get("environment")), {}),
        }
    merged["frameworks"] = frameworks
    return merged


def result_sort_key(rec: dict) -> tuple:
    return (rec["framework"], rec["framework_version"], rec["variant"], rec["device"], case_label(rec),
            rec["run_id"])


@dataclasses.dataclass
class Merged:
    environments: list[dict]
    results: list[dict]
    duplicates: int = 0      # identical records dropped
    conflicts: int = 0       # same (lane, case, target), different content: one kept
    orphans: int = 0         # results whose run has no environment record (kept, own lane)


def merge(environments: list[dict], results: list[dict], *, keep_timing: bool = False) -> Merged:
    lanes: dict[str, list[dict]] = {}
    run_lane: dict[str, str] = {}
    for env in environments:
        lane = lane_of(env)
        lanes.setdefault(lane, []).append(env)
        run_lane[env["run_id"]] = lane
    out = Merged([_merge_lane(lane, envs) for lane, envs in sorted(lanes.items())], [])
    kept: dict[tuple, tuple[str, dict]] = {}
    for rec in results:
        if rec["run_id"] not in run_lane:
            out.orphans += 1
        rec = {**rec, "run_id": run_lane.get(rec["run_id"], rec["run_id"])}
        if not keep_timing:
            rec["duration_s"] = None
        key = (rec["run_id"], case_label(rec), rec["target"], rec["framework_version"])
        text = dumps(rec)
        if key in kept:
            if kept[key][0] == text:
                out.duplicates += 1
                continue
            out.conflicts += 1
            if kept[key][0] < text:
                continue
        kept[key] = (text, rec)
    out.results = sorted((rec for _, rec in kept.values()), key=result_sort_key)
    return out


def write_merged(merged: Merged, path) -> None:
    with open_results(path) as fh:  # .gz compressed, as every results writer
        writer = ResultsWriter(fh)
        for rec in (*merged.environments, *merged.results):
            writer.write(rec)
