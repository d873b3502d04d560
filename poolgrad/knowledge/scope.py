"""Matching a finding's scope: globs (ops, dtypes, variants, devices), feature requirements
(case properties, CPU and kernel features) and version ranges."""

from __future__ import annotations

import fnmatch
import functools

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


@functools.lru_cache(maxsize=4096)
def matches_any(value: str, patterns: tuple[str, ...]) -> bool:
    # Asked for every finding of a target on every result: a few ops and dtypes, many times.
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


def features_hold(required, present: frozenset[str]) -> bool:
    """Every requirement holds: "name" present, "!name" absent, "a|b" (or "!a|b") either holds."""
    return all(any((a[1:] not in present) if a.startswith("!") else (a in present) for a in r.split("|"))
               for r in required)


@functools.lru_cache(maxsize=None)
def version_in(versions: str, version: str) -> bool:
    if not versions:
        return True
    try:
        # Local labels (+cpu) do not change behaviour; compare the public version.
        return SpecifierSet(versions).contains(Version(version).public, prereleases=True)
    except InvalidVersion:
        return False
