"""Reading and writing results records (JSON Lines) and the array encoding they use.

Arrays are nested lists in channels-first layout. Values that JSON cannot hold, and the sign
of zero that a JSON number may lose, are the strings "nan", "inf", "-inf" and "-0.0".
Every suite dtype (float16, bfloat16, float32, float64) widens exactly to float64, so a value
is written as its float64 shortest repr and decodes back to the same bits.
"""

from __future__ import annotations

import collections
import gzip
import json
import math
import os
import time
from pathlib import Path
from typing import Iterable

import numpy as np

from poolgrad.json_values import decode_array, encode_array, written_values  # noqa: F401  (the codec's arrays)

from .schema import (AGAINST_EXPECTED, CASE_DEFAULTS, CASE_FIELDS, EMPTY_AS_ABSENT, FROM_TARGET, OPTIONAL, TEXT_FIELDS,
                     RecordError, target_fields, validate)



def _json_scalar(v):
    """Non-finite metrics use the array strings: JSON has no NaN or infinity."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def dumps(rec: dict) -> str:
    """One record as canonical JSON (sorted keys, no spaces): the same record, the same bytes."""
    rec = {k: _json_scalar(v) for k, v in rec.items()}
    return json.dumps(rec, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def write_record(fh, rec: dict) -> None:
    """Append one record as a JSON line and flush, so a run that dies loses nothing written."""
    fh.write(dumps(rec) + "\n")
    fh.flush()


FLUSH_S = 1.0
# Results a delta is written against, least recent dropped first: a case's results arrive
# together (a unit of work holds every target of a case).
PREVIOUS_KEPT = 4096


class ResultsWriter:
    """Writes a results file whose size follows cases, not targets x arrays: the first result
    of a case is preceded by a ``case`` record (CASE_FIELDS: the spec and the case's arrays),
    and every result record refers to it by case_id and carries only what the target produced:
    its arrays where they differ from the reference (AGAINST_EXPECTED), its case by the case
    record's ``ref`` (an integer: ids are long and every result and ``unsupported`` record
    names cases), findings by id (each written once as a ``finding`` record), message texts by
    id (each written once as a ``text`` record), no field its target, case or target's previous
    result already says, no null fields and no empty lists. ``_Decoder`` undoes this."""

    def __init__(self, fh):
        self.fh = fh
        self._flushed = time.monotonic()
        # Per case written, what its results are written against: its CASE_DEFAULTS, not its
        # arrays (a result brings its case's arrays along). Long-lived containers of nested
        # lists are what the cyclic garbage collector walks on every full pass.
        self._cases: dict[str, dict] = {}
        self._refs: dict[str, int] = {}
        self._findings: set[str] = set()
        self._previous: collections.OrderedDict[tuple, dict] = collections.OrderedDict()
        self._versions: dict[str, str] = {}
        self._texts: dict[str, int] = {}

    def case(self, rec: dict) -> dict:
        """Writes the case record of ``rec``'s case (its CASE_FIELDS, and CASE_DEFAULTS from
        the first result) the first time the case is met; returns the case's CASE_DEFAULTS."""
        defaults = self._cases.get(rec["case_id"])
        if defaults is None:
            defaults = self._cases[rec["case_id"]] = {f: rec.get(f) for f in CASE_DEFAULTS}
            ref = self._refs[rec["case_id"]] = len(self._refs)
            self._put({"record": "case", "case_id": rec["case_id"], "ref": ref, **{f: rec.get(f) for f in CASE_FIELDS},
                       **{k: v for k, v in defaults.items() if v is not None}})
        return defaults

    def write(self, rec: dict) -> None:
        """Write ``rec``: a whole result, or one against its case (against_case), whose first
        of its case brings the case's fields; or another record."""
        if rec["record"] == "result":
            defaults = self._cases.get(rec["case_id"]) or self.case(rec)
            rec = self._compact(against_case({k: v for k, v in rec.items()
                                              if not (k in CASE_DEFAULTS and v == defaults[k])}))
        # Nulls are left out, except a case default's: absent reads as the case's value.
        rec = {k: v for k, v in rec.items() if not (k in OPTIONAL and v is None and k not in CASE_DEFAULTS)}
        if rec["record"] == "result":
            rec = self._delta(rec)
            del rec["record"]  # a line without "record" is a result: most lines are
        elif rec["record"] == "unsupported":
            rec = {**rec, "case_ids": [self._refs.get(c, c) for c in rec["case_ids"]]}
        self._put(rec)

    def _put(self, rec: dict) -> None:
        """Write a record, flushing at most every FLUSH_S: a flush per record cost the
        controller a write system call per test (under cProfile, 4 s of its 16 s on 8,000
        tests). Closing the file, or an exception ending the run, flushes the rest; a killed
        run loses at most FLUSH_S of records."""
        self.fh.write(dumps(rec) + "\n")
        if time.monotonic() - self._flushed >= FLUSH_S:
            self.fh.flush()
            self._flushed = time.monotonic()

    def _delta(self, rec: dict) -> dict:
        """The record as it differs from the last result of the same case, verdict and mode
        (most of a conforming result is what the case's other conforming results say)."""
        key = _delta_key(rec)
        previous = self._previous.pop(key, None)
        self._previous[key] = rec
        if len(self._previous) > PREVIOUS_KEPT:  # past that, a result is written whole
            self._previous.popitem(last=False)
        if previous is None:
            return rec
        out = {k: v for k, v in rec.items() if k in _IDENTITY or previous.get(k, _ABSENT) != v}
        unset = sorted(k for k in previous if k not in rec)
        return {**out, DELTA: 1, **({UNSET: unset} if unset else {})}

    def _compact(self, rec: dict) -> dict:
        for f in rec.get("findings") or ():
            if f["id"] not in self._findings:
                self._findings.add(f["id"])
                self._put({"record": "finding", **f})
        rec = {**rec, "case_id": self._refs.get(rec["case_id"], rec["case_id"])}
        derived = target_fields(rec["target"])
        # A target's release is written where it is not the one its last written result named.
        same_version = self._versions.get(rec["target"]) == rec["framework_version"]
        self._versions[rec["target"]] = rec["framework_version"]
        rec = {k: [f["id"] for f in v] if k == "findings" and v else v for k, v in rec.items()
               if not (k in EMPTY_AS_ABSENT and v == [] or k in FROM_TARGET and v == derived[k]
                       or k == "framework_version" and same_version or k == "mode" and v == "backward")}
        return {**rec, **{f: self._text_id(rec[f]) for f in TEXT_FIELDS if isinstance(rec.get(f), str)}}

    def _text_id(self, text: str) -> int:
        """The id of a message text, written once as a ``text`` record (messages repeat across
        targets and cases: a framework's refusal, "known: <findings>")."""
        tid = self._texts.get(text)
        if tid is None:
            tid = self._texts[text] = len(self._texts)
            self._put({"record": "text", "id": tid, "text": text})
        return tid


def against_case(rec: dict) -> dict:
    """A result as it is written against its case, the inverse of :func:`restore`: without the
    case's fields (CASE_FIELDS: its case record holds them), the arrays that are the
    reference's (named in ``as_expected``) left out, one that differs in a few cells as
    ``<name>_changes``. A worker sends its results in this form (the first of a case with the
    case's fields) and a writer writes it; a result already in it comes back the same."""
    same = rec.get("as_expected") or ()
    out = {k: v for k, v in rec.items() if k not in CASE_FIELDS and k not in same}
    for name, ref in AGAINST_EXPECTED.items():
        got, want = out.get(name), rec.get(ref)
        if got is None or want is None:
            continue
        g, w = np.array(got, dtype=object).ravel(), np.array(want, dtype=object).ravel()
        if g.shape == w.shape:
            changed = [i for i in range(g.size) if g[i] != w[i] or type(g[i]) is not type(w[i])]
            if 2 * len(changed) < g.size:  # a pair per changed cell: cheaper only when few change
                out[f"{name}_changes"] = [[i, g[i]] for i in changed]
                del out[name]
    return out


def restore(rec: dict, case: dict) -> dict:
    """A result with its case's fields and its arrays whole again (the inverse of against_case);
    ``as_expected`` still names the arrays that are the reference's."""
    # A case record holds what its writer moved there (older writers: the arrays only).
    out = {**rec, **{f: case[f] for f in CASE_FIELDS if case.get(f) is not None}}
    for f in CASE_DEFAULTS:  # left out where it was the case's; written null where null
        if f not in rec:
            out[f] = case.get(f)
    for name in out.get("as_expected") or ():
        out[name] = case[AGAINST_EXPECTED[name]]
    for name, ref in AGAINST_EXPECTED.items():
        changes = out.pop(f"{name}_changes", None)
        if changes is not None:
            want = np.array(case[ref], dtype=object)
            flat = want.ravel().copy()
            for i, v in changes:
                flat[i] = v
            out[name] = flat.reshape(want.shape).tolist()
    return out


# A result written as a delta (``ResultsWriter._delta``) says so, and lists the fields the
# previous result of its case, verdict and mode had and it has not.
DELTA, UNSET = "delta", "unset"
# What a result is a result of: written in every result.
_IDENTITY = frozenset({"record", "case_id", "target", "verdict", "mode"})
_ABSENT = object()


def _delta_key(rec: dict) -> tuple:
    return rec["case_id"], rec["verdict"], rec.get("mode") or "backward"


def _undelta(rec: dict, previous: dict) -> dict:
    """A result whole again from its delta and the previous result of its key (as written)."""
    if rec.get("record") == "result" and isinstance(rec.get("case_id"), str) and isinstance(rec.get("verdict"), str):
        if rec.pop(DELTA, None):
            before = previous.get(_delta_key(rec))
            if before is None:
                raise RecordError(f"result of case {rec['case_id']!r} is a delta, but no result of its case, "
                                  f"verdict and mode comes before it")
            unset = rec.pop(UNSET, ())
            rec = {**{k: v for k, v in before.items() if k not in unset}, **rec}
        previous[_delta_key(rec)] = rec
    return rec


class _Decoder:
    """Undoes ResultsWriter's per-file encoding, line by line: a line without ``record`` is a
    result; a case named by an integer is the case record of that ``ref``; a target, verdict or
    message given as an integer is that ``text`` record's text; a delta takes what it leaves out
    from the previous result of its key; a result without framework_version has its target's
    last written one."""

    def __init__(self):
        self.previous: dict[tuple, dict] = {}
        self.texts: dict[int, str] = {}
        self.versions: dict[str, str] = {}
        self.cases: dict[int, str] = {}

    def __call__(self, rec):
        if not isinstance(rec, dict):
            return rec
        rec.setdefault("record", "result")
        if rec["record"] == "text" and isinstance(rec.get("id"), int) and isinstance(rec.get("text"), str):
            self.texts[rec["id"]] = rec["text"]
        if rec["record"] == "case" and isinstance(rec.get("ref"), int):
            self.cases[rec.pop("ref")] = rec.get("case_id")
        if rec["record"] == "unsupported" and isinstance(rec.get("case_ids"), list):
            rec["case_ids"] = [self._case("case_ids", c) for c in rec["case_ids"]]
        if rec["record"] != "result":
            return rec
        for f in TEXT_FIELDS:
            if isinstance(rec.get(f), int) and not isinstance(rec[f], bool):
                if rec[f] not in self.texts:
                    raise RecordError(f"field {f!r} names text {rec[f]}, which no text record before it holds")
                rec[f] = self.texts[rec[f]]
        if not isinstance(rec.get("target"), str):
            return rec
        rec["case_id"] = self._case("case_id", rec.get("case_id"))
        rec = dict(_undelta(rec, self.previous))
        if "framework_version" in rec:
            self.versions[rec["target"]] = rec["framework_version"]
        elif rec["target"] in self.versions:
            rec["framework_version"] = self.versions[rec["target"]]
        return rec

    def _case(self, field: str, ref):
        if not isinstance(ref, int) or isinstance(ref, bool):
            return ref
        if ref not in self.cases:
            raise RecordError(f"field {field!r} names case {ref}, which no case record before it has as its ref")
        return self.cases[ref]


def open_results(path):
    """A results file to write (text): gzip-compressed where the name ends in .gz. The writer's
    flushes are gzip sync points, so a run killed mid-way leaves a file whose records up to
    the last flush read back (iter_file)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if str(path).endswith(".gz"):
        return gzip.open(path, "wt", encoding="utf-8", compresslevel=6)
    return open(path, "w", encoding="utf-8")


def iter_file(path) -> Iterable[dict]:
    """Validated records of one JSON-lines file; errors name the file and line. A .gz file
    reads the same; one that ends without gzip's trailer (its run was killed) reads up to its
    last complete line."""
    decode = _Decoder()
    gz = str(path).endswith(".gz")
    with (gzip.open if gz else open)(path, "rt", encoding="utf-8") as fh:
        lines = _lines(fh, gz)
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield validate(decode(json.loads(line)))
            except json.JSONDecodeError as e:
                raise RecordError(f"{path}:{lineno}: not a JSON object: {e.msg}") from None
            except RecordError as e:
                raise RecordError(f"{path}:{lineno}: {e}") from None


def _lines(fh, gz: bool) -> Iterable[str]:
    if not gz:
        yield from fh
        return
    try:
        for line in fh:
            if line.endswith("\n"):
                yield line
    except EOFError:  # no trailer: the stream ends at the killed run's last sync point
        return


def read_results(paths) -> tuple[list[dict], list[dict]]:
    """(environments, results) of one or several results files, in file order; results are
    whole again (their case's arrays filled in from the file's case records)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return split(rec for p in paths for rec in _joined(iter_file(p)))


def _joined(records: Iterable[dict]) -> Iterable[dict]:
    """Results whole again: their case's fields and arrays filled in from the file's case
    records (within one file: case ids are a run's), findings from its finding records, and one
    result per case of an ``unsupported`` record. Results written with their arrays inline
    (before case records existed) pass through as they are."""
    cases: dict[str, dict] = {}
    findings: dict[str, dict] = {}
    for rec in records:
        if rec["record"] == "case":
            cases[rec["case_id"]] = rec
        elif rec["record"] == "finding":
            findings[rec["id"]] = {k: v for k, v in rec.items() if k != "record"}
        elif rec["record"] == "unsupported":
            yield from (_joined_result(r, cases, findings) for r in unsupported_results(rec))
        elif rec["record"] == "result":
            yield _joined_result(rec, cases, findings)
        else:
            yield rec


def _joined_result(rec: dict, cases: dict, findings: dict) -> dict:
    if rec["case_id"] in cases and rec.get("input") is None:
        rec = restore(rec, cases[rec["case_id"]])
    elif rec.get("spec") is None:
        raise RecordError(f"result of case {rec['case_id']!r} has no spec and no case record before it")
    if rec.get("findings"):
        try:
            rec["findings"] = [findings[f] if isinstance(f, str) else f for f in rec["findings"]]
        except KeyError as e:
            raise RecordError(f"result of case {rec['case_id']!r} names finding {e.args[0]!r}, which no "
                              f"finding record before it describes") from None
    for f in CASE_DEFAULTS:
        rec.setdefault(f, None)
    for f in EMPTY_AS_ABSENT:
        if rec.get(f) is None:
            rec[f] = []
    return rec


def unsupported_results(rec: dict) -> list[dict]:
    """The result records an ``unsupported`` record stands for, one per case it names."""
    verdict = rec.get("verdict", "unsupported")
    return [validate({"record": "result", "run_id": rec["run_id"], "case_id": case_id, "target": rec["target"],
                      **target_fields(rec["target"]), "framework_version": rec.get("framework_version") or "",
                      "verdict": verdict, "outcome": "skipped", "policy": None,
                      "call_shape": None, "call_properties": None,  # no call was made
                      "message": f"{verdict.replace('_', ' ')}: {rec['reason']}", "framework_message": rec["reason"]})
            for case_id in rec["case_ids"]]


def split(records: Iterable[dict]) -> tuple[list[dict], list[dict]]:
    """(environments, results); a run that wrote its environment more than once (first what
    was known at its start, then completed at its end) counts by its last one, in the place of
    its first."""
    envs: dict = {}
    results = []
    for rec in records:
        if rec["record"] == "environment":
            envs[rec.get("run_id"), len(envs) if rec.get("run_id") is None else None] = rec
        elif rec["record"] == "result":
            results.append(rec)
    return list(envs.values()), results


def load(source) -> tuple[list[dict], list[dict]]:
    """(environments, results) from paths or from records already in memory (the plugin's)."""
    if isinstance(source, (str, os.PathLike)):
        return read_results([source])
    items = list(source)
    if items and all(isinstance(s, (str, os.PathLike)) for s in items):
        return read_results([Path(s) for s in items])
    try:
        return split(_joined(validate(r) for r in items))
    except RecordError as e:
        raise RecordError(f"in-memory record: {e}") from None
