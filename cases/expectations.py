"""Known divergences: what a framework release is expected to do where it departs from the
canonical spec, as data (cases/data/expectations.toml), and the release audit built on it.

An entry scopes itself by framework, variant, device, version range and a case selector, and
claims either a policy (the framework's results equal the reference under that policy) or a
verdict (error, unsupported, wrong, ...). During a run, a record in scope of an entry is
``expected`` when the claim still holds and ``behaviour_changed`` when it does not; an entry
that no record fell in is reported as stale.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import tomllib
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

DEFAULT_PATH = Path(__file__).parent / "data" / "expectations.toml"
_SELECTOR_KEYS = ("op", "family", "dtype", "case")
# policy / forward_policy: the policies claimed for the gradient / forward (forward defaults
# to policy), as tables of verdicts.Policy fields, e.g. {tie = "first", nan_tie = "last"}.
_ENTRY_KEYS = {"id", "framework", "variants", "devices", "versions", "select", "verdict", "policy",
               "forward_policy", "reason", "link"}


# Claims about behaviour, checked by re-running the reference under the claimed policies.
POLICY_VERDICTS = ("policy", "inconsistent")


class ExpectationsError(ValueError):
    pass


def _check_policy(entry_id, key, value):
    from verdicts import Policy
    try:
        Policy(**value)
    except TypeError as e:
        raise ExpectationsError(f"expectation {entry_id!r}: field {key!r} is not a policy ({e}); "
                                f"keys: tie, nan, nan_tie, ftz, padding, order, signed_zero, init") from None


@dataclasses.dataclass(frozen=True)
class Expectation:
    id: str
    framework: str
    variants: tuple[str, ...]
    devices: tuple[str, ...]
    versions: SpecifierSet
    select: dict
    verdict: str
    policy: dict | None
    forward_policy: dict | None
    reason: str
    link: str

    def applies(self, *, framework: str, variant: str, device: str, version: str,
                op: str, family: str | None, dtype: str, case_id: str | None) -> bool:
        """Whether the record is in scope; a family or case_id of None is not tested (the
        entry's family and case selectors name catalogue cases, not fuzzed or users' ones)."""
        if framework != self.framework:
            return False
        if not any(fnmatch.fnmatchcase(variant, v) for v in self.variants):
            return False
        if not any(fnmatch.fnmatchcase(device, d) for d in self.devices):
            return False
        if not _version_in(str(self.versions), version):
            return False
        values = {"op": op, "family": family, "dtype": dtype, "case": case_id}
        return all(values[k] is None or any(fnmatch.fnmatchcase(values[k], p) for p in pats)
                   for k, pats in self.select.items())

    def to_dict(self) -> dict:
        return {"id": self.id, "verdict": self.verdict, "policy": self.policy,
                "forward_policy": self.forward_policy, "reason": self.reason, "link": self.link}


@functools.lru_cache(maxsize=None)
def _version_in(versions: str, version: str) -> bool:
    # Keyed on strings: hashing a SpecifierSet canonicalizes it on every call.
    try:
        # Local labels (+cpu) do not change behaviour; compare the public version.
        return SpecifierSet(versions).contains(Version(version).public, prereleases=True)
    except InvalidVersion:
        return False


def _patterns(entry_id, key, value, default):
    if value is None:
        return default
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ExpectationsError(f"expectation {entry_id!r}: field {key!r} must be a string or a list of strings")
    return tuple(value)


def _entry(raw: dict, index: int) -> Expectation:
    entry_id = raw.get("id") or f"#{index}"
    unknown = sorted(set(raw) - _ENTRY_KEYS)
    if unknown:
        raise ExpectationsError(f"expectation {entry_id!r}: unknown field {unknown[0]!r}; allowed: {', '.join(sorted(_ENTRY_KEYS))}")
    for key in ("framework", "verdict", "reason"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ExpectationsError(f"expectation {entry_id!r}: field {key!r} is required (a non-empty string)")
    if raw["verdict"] in POLICY_VERDICTS and not isinstance(raw.get("policy"), dict):
        raise ExpectationsError(f"expectation {entry_id!r}: verdict {raw['verdict']!r} needs a 'policy' table, e.g. {{tie = \"last\", nan = \"propagate\"}}")
    for key in ("policy", "forward_policy"):
        if raw.get(key) is not None:
            _check_policy(entry_id, key, raw[key])
    try:
        versions = SpecifierSet(raw.get("versions", ""))
    except InvalidSpecifier as e:
        raise ExpectationsError(f"expectation {entry_id!r}: field 'versions' is not a PEP 440 specifier: {e}") from None
    select = raw.get("select", {})
    if not isinstance(select, dict) or set(select) - set(_SELECTOR_KEYS):
        raise ExpectationsError(f"expectation {entry_id!r}: field 'select' takes only {', '.join(_SELECTOR_KEYS)}")
    return Expectation(
        id=entry_id, framework=raw["framework"],
        variants=_patterns(entry_id, "variants", raw.get("variants"), ("*",)),
        devices=_patterns(entry_id, "devices", raw.get("devices"), ("*",)),
        versions=versions,
        select={k: _patterns(entry_id, f"select.{k}", v, ("*",)) for k, v in select.items()},
        verdict=raw["verdict"], policy=raw.get("policy"),
        forward_policy=raw.get("forward_policy"), reason=raw["reason"], link=raw.get("link", ""))


def load(path: str | Path = DEFAULT_PATH) -> list[Expectation]:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise ExpectationsError(f"{path}: cannot read expectations file: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ExpectationsError(f"{path}: not valid TOML: {e}") from None
    entries = Expectations(_entry(raw, i) for i, raw in enumerate(data.get("divergence", [])))
    ids = [e.id for e in entries]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ExpectationsError(f"{path}: duplicate expectation id {dupes[0]!r}")
    return entries


class Expectations(list):
    """The entries of a file, in file order, with the ones that can apply to a target looked
    up once: every (case, target) check searches them, ~20,000 times per catalogue run."""

    def for_target(self, framework: str, variant: str, device: str, op: str) -> list[Expectation]:
        index = self.__dict__.setdefault("_index", {})
        key = (framework, variant, device, op)
        if key not in index:
            index[key] = [e for e in self if e.framework == framework
                          and any(fnmatch.fnmatchcase(variant, v) for v in e.variants)
                          and any(fnmatch.fnmatchcase(device, d) for d in e.devices)
                          and any(fnmatch.fnmatchcase(op, p) for p in e.select.get("op", ("*",)))]
        return index[key]


def _candidates(entries, record) -> list[Expectation]:
    if isinstance(entries, Expectations):
        return entries.for_target(record["framework"], record["variant"], record["device"], record["op"])
    return entries


def find(entries: list[Expectation], **record) -> Expectation | None:
    """The first entry whose scope holds the record (file order is precedence order)."""
    return next((e for e in _candidates(entries, record) if e.applies(**record)), None)


def in_scope(entries: list[Expectation], **record) -> list[Expectation]:
    """Every entry whose scope holds the record, family and case selectors left out: the
    candidates for a case outside the catalogue, which one matches by behaviour."""
    record = {**record, "family": None, "case_id": None}
    return [e for e in _candidates(entries, record) if e.applies(**record)]
