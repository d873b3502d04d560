"""Where the knowledge base comes from: the findings files and release-lane histories of every
installed framework package (a plugin's included), loaded into one Knowledge."""

from __future__ import annotations

import dataclasses
import importlib.util
import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet

from .base import Knowledge
from .finding import Finding
from .history import load_history, merged, version_range
from .schema import FindingsError, parse_finding

# load()'s default history: every framework package's history.json, united
FRAMEWORK_HISTORIES = "frameworks"


def framework_packages() -> dict[str, Path]:
    """Every registered framework's package directory, by framework (its planner's: a
    framework's knowledge lives in its package, a plugin's included), then those of variants
    another package runs (an API over several backends), by package, in registration order."""
    from poolgrad.adapters import registry  # the registry reads entry points: only when asked

    frameworks = registry.FRAMEWORKS.values()
    named = {**{fw.name: fw.planner for fw in frameworks if fw.planner},
             **{w.planner: w.planner for fw in frameworks for w in fw.workers.values() if w.planner}}
    found = {}
    for key, package in named.items():
        spec = importlib.util.find_spec(package)
        if spec and spec.origin and Path(spec.origin).parent not in found.values():
            found[key] = Path(spec.origin).parent
    return found


def framework_files() -> list[Path]:
    """The knowledge base poolgrad reads by default: the ``findings.toml`` of every framework
    package (framework_packages)."""
    return [d / "findings.toml" for d in framework_packages().values() if (d / "findings.toml").exists()]


def history_files() -> list[Path]:
    """The lanes' history poolgrad reads by default: each framework package's ``history.json``."""
    return [d / "history.json" for d in framework_packages().values() if (d / "history.json").exists()]


def load(path: str | Path | None = None, history: str | Path | None = FRAMEWORK_HISTORIES, extra=()) -> Knowledge:
    """The findings of ``path`` (default: :func:`framework_files`), plus those of the files in
    ``extra`` (a user's own, which extend the base, never replace it); their version ranges from
    ``history``: a history file, None for none, or by default every framework's (history_files)."""
    paths = [Path(path)] if path is not None else framework_files()
    findings = []
    for p in (*paths, *map(Path, extra)):
        findings += _read(p)
    ids = [f.id for f in findings]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise FindingsError(f"duplicate finding id {dupes[0]!r} (in {', '.join(map(str, (*paths, *extra)))})")
    files = history_files() if history == FRAMEWORK_HISTORIES else [Path(history)] if history is not None else []
    hist = merged(*(load_history(h) for h in files if h.exists()))
    if files:
        findings = [dataclasses.replace(f, versions=SpecifierSet(version_range(hist, f.id))) for f in findings]
    return Knowledge(findings, hist)


def _read(path: Path) -> list[Finding]:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise FindingsError(f"{path}: cannot read the findings file: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise FindingsError(f"{path}: not valid TOML: {e}") from None
    unknown = sorted(set(data) - {"finding"})
    if unknown:
        raise FindingsError(f"{path}: unknown table {unknown[0]!r}; entries are [[finding]] tables")
    try:
        return [parse_finding(raw, i, path.parent) for i, raw in enumerate(data.get("finding", []))]
    except FindingsError as e:
        raise FindingsError(f"{path}: {e}") from None
