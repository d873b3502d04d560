"""The release lanes' history: on which framework releases each finding was seen to hold.

A release lane (``noxfile.py``) installs one release of one framework and runs the catalogue
on CPU; its results file is judged here against the knowledge base with no version ranges,
exactly as a run judges a result (suite.check), and reduced to counts per finding and lane:
how many results the finding explained, and how many in its scope it did not. The committed
``poolgrad/cases/data/history.json`` holds only those counts and the lanes' environments (no arrays);
each finding's version range is derived from it (:func:`version_range`). ``python -m
poolgrad.suite.history`` builds and shows it.

A range is bounded only where a measured release contradicts the finding: it starts at the
oldest release measured to hold after one measured not to, and ends before the first release
measured not to hold after the newest one that holds. Where the finding holds at the edge of
what was measured, the range stays open on that side.
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


def version_range(history: dict, finding_id: str) -> str:
    """The PEP 440 range the finding holds for, measured (see the module docstring)."""
    try:
        seen = sorted(((version_key(v), s) for v, s in per_release(history, finding_id).items()
                       if s != "not seen"), key=lambda item: item[0])
    except InvalidVersion:
        return ""
    holding = [v for v, s in seen if s in ("holds", "partly")]
    if not holding:
        return ""
    lo, hi = holding[0], holding[-1]
    bounds = []
    if any(s == "does not hold" and v < lo for v, s in seen):
        bounds.append(f">={lo}")
    after = [v for v, s in seen if s == "does not hold" and v > hi]
    if after:
        bounds.append(f"<{after[0]}")
    return ",".join(bounds)
