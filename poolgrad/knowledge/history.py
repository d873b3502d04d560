"""The release lanes' history: on which framework releases each finding was seen to hold.

A release lane (``noxfile.py``) installs one release of one framework and runs the catalogue
on CPU; its results file is judged here against the knowledge base with no version ranges,
exactly as a run judges a result (suite.check), and reduced to counts per finding and lane:
how many results the finding explained, and how many in its scope it did not. Each framework
keeps the history of its own lanes beside its findings, as ``history.json`` in its package
(plugins' included); the knowledge base reads them all, united (:func:`merged`). A file holds
only those counts and the lanes' environments (no arrays); each finding's version range is
derived from it (:func:`version_range`). ``python -m poolgrad.suite.history`` builds and shows it.

A range is bounded only where a measured release contradicts the finding: it starts at the
oldest release measured to hold after one measured not to, and ends before the first release
measured not to hold after the newest one that holds. Where the finding holds at the edge of
what was measured, the range stays open on that side. The release that ends it is the first
measured without the behaviour (:func:`fixed_in`): fixed upstream, or changed past the claim.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from packaging.version import InvalidVersion, Version

FORMAT = "poolgrad-history/1"


def load_history(path) -> dict:
    data = json.loads(Path(path).read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} file")
    return data


def merged(*histories: dict) -> dict:
    """One history of several (each framework's, or a file and the lanes of a new build): a
    lane of the same name in a later one replaces the earlier's, and with it the counts of every
    finding the later run measured there. A finding it did not measure (no result in its scope:
    the catalogue no longer reaches it, or the run was a subset) keeps the earlier run's counts:
    the release is the same, only what was run differs, and a measured bound is not lost to a
    run that did not look."""
    lanes: dict[str, dict] = {}
    findings: dict[str, dict] = {}
    for history in histories:
        lanes.update((lane["lane"], lane) for lane in history.get("lanes", []))
        for fid, per in history.get("findings", {}).items():
            findings.setdefault(fid, {}).update(per)
    return {"format": FORMAT,
            "lanes": sorted(lanes.values(), key=lambda lane: (lane["framework"], version_key(lane["version"]), lane["lane"])),
            "findings": {fid: dict(sorted(per.items())) for fid, per in sorted(findings.items()) if per}}


def version_key(v: str) -> Version:
    return Version(Version(v).public)


def status(counts) -> str:
    explained, contradicted = counts
    if explained and contradicted:
        return "partly"
    return "holds" if explained else ("does not hold" if contradicted else "not seen")


def per_release(history: dict, finding_id: str) -> dict[str, str]:
    """Release -> status of the finding, over every lane of that release."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    lanes = {lane["lane"]: lane for lane in history.get("lanes", [])}
    for lane, (explained, contradicted) in history.get("findings", {}).get(finding_id, {}).items():
        t = totals[lanes[lane]["version"]]
        t[0] += explained
        t[1] += contradicted
    return {v: status(c) for v, c in totals.items()}


def _measured(history: dict, finding_id: str) -> tuple[list[tuple[Version, str]], list[Version]]:
    """(release, status) of the releases that saw the finding's scope, oldest first, and those
    where it held (partly counts)."""
    try:
        seen = sorted(((version_key(v), s) for v, s in per_release(history, finding_id).items()
                       if s != "not seen"), key=lambda item: item[0])
    except InvalidVersion:
        return [], []
    return seen, [v for v, s in seen if s in ("holds", "partly")]


def fixed_in(history: dict, finding_id: str) -> str:
    """The first release measured without the behaviour after the newest one measured with it
    ("" where none is)."""
    seen, holding = _measured(history, finding_id)
    after = [v for v, s in seen if holding and s == "does not hold" and v > holding[-1]]
    return str(after[0]) if after else ""


def version_range(history: dict, finding_id: str) -> str:
    """The PEP 440 range the finding holds for, measured (see the module docstring)."""
    seen, holding = _measured(history, finding_id)
    if not holding:
        return ""
    bounds = []
    if any(s == "does not hold" and v < holding[0] for v, s in seen):
        bounds.append(f">={holding[0]}")
    if fixed := fixed_in(history, finding_id):
        bounds.append(f"<{fixed}")
    return ",".join(bounds)
