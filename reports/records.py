"""Reading and writing results records (JSON Lines) and the array encoding they use.

Arrays are nested lists in channels-first layout. Values that JSON cannot hold, and the sign
of zero that a JSON number may lose, are the strings "nan", "inf", "-inf" and "-0.0".
Every suite dtype (float16, bfloat16, float32, float64) widens exactly to float64, so a value
is written as its float64 shortest repr and decodes back to the same bits.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Iterable

import numpy as np

from cases.json_values import SPECIAL

from .schema import AGAINST_EXPECTED, CASE_DEFAULTS, CASE_FIELDS, OPTIONAL, RecordError, validate



def encode_array(a) -> list:
    """A NumPy array as nested lists; floats use the special strings, integers stay ints."""
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return a.tolist()
    f = a.astype(np.float64)
    out = f.astype(object)
    out[np.isnan(f)] = "nan"
    out[f == np.inf] = "inf"
    out[f == -np.inf] = "-inf"
    out[(f == 0) & np.signbit(f)] = "-0.0"
    return out.tolist()


def decode_array(nested, dtype) -> np.ndarray:
    """The inverse of encode_array: nested lists (with the special strings) to ``dtype``.

    ``dtype`` may be a name ("bfloat16") or a NumPy dtype. A ragged list or an unknown string
    raises ValueError.
    """
    dtype = _dtype(dtype)
    obj = np.array(nested, dtype=object)
    if obj.size and any(isinstance(v, list) for v in obj.flat):
        raise ValueError("ragged nested list: every row must have the same length")
    flat = obj.ravel()
    out = np.empty(flat.shape, np.float64)
    is_str = np.array([isinstance(v, str) for v in flat], dtype=bool)
    for i in np.flatnonzero(is_str):
        if flat[i] not in SPECIAL:
            raise ValueError(f"unknown value {flat[i]!r} in an array; allowed strings: {', '.join(SPECIAL)}")
        out[i] = SPECIAL[flat[i]]
    out[~is_str] = flat[~is_str].astype(np.float64)
    out = out.reshape(obj.shape)
    return out.astype(dtype)


def _dtype(dtype) -> np.dtype:
    if isinstance(dtype, str):
        from reference.dtypes import DTYPES
        return DTYPES[dtype] if dtype in DTYPES else np.dtype(dtype)
    return np.dtype(dtype)


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


class ResultsWriter:
    """Writes a results file whose size follows cases, not targets x arrays: the first result
    of a case is preceded by a ``case`` record (CASE_FIELDS: the spec and the case's arrays),
    and every result record refers to it by case_id and carries only what the target produced:
    its arrays where they differ from the reference (AGAINST_EXPECTED), and no null fields."""

    def __init__(self, fh):
        self.fh = fh
        self._cases: dict[str, dict] = {}

    def write(self, rec: dict) -> None:
        if rec["record"] == "result" and rec.get("input") is not None:
            case = self._cases.get(rec["case_id"])
            if case is None:
                case = {"record": "case", "case_id": rec["case_id"],
                        **{f: rec.get(f) for f in CASE_FIELDS + CASE_DEFAULTS}}
                self._cases[rec["case_id"]] = case
                write_record(self.fh, {k: v for k, v in case.items() if not (k in CASE_DEFAULTS and v is None)})
            rec = _against_expected({k: v for k, v in rec.items() if k not in CASE_FIELDS and not (
                k in CASE_DEFAULTS and v is not None and v == case.get(k))}, case)
        write_record(self.fh, {k: v for k, v in rec.items() if not (k in OPTIONAL and v is None)})


def _against_expected(rec: dict, case: dict) -> dict:
    same = []
    for name, ref in AGAINST_EXPECTED.items():
        got, want = rec.get(name), case.get(ref)
        if got is None or want is None:
            continue
        if got == want:
            same.append(name)
            del rec[name]
            continue
        g, w = np.array(got, dtype=object).ravel(), np.array(want, dtype=object).ravel()
        if g.shape == w.shape:
            changed = [i for i in range(g.size) if g[i] != w[i] or type(g[i]) is not type(w[i])]
            if 2 * len(changed) < g.size:  # a pair per changed cell: cheaper only when few change
                rec[f"{name}_changes"] = [[i, g[i]] for i in changed]
                del rec[name]
    if same:
        rec["as_expected"] = same
    return rec


def _restore(rec: dict, case: dict) -> dict:
    """A result with its case's fields and its arrays whole again."""
    # A case record holds what its writer moved there (older writers: the arrays only).
    out = {**rec, **{f: case[f] for f in CASE_FIELDS if case.get(f) is not None}}
    for f in CASE_DEFAULTS:  # left out (read as null) where it was the case's
        if out.get(f) is None and case.get(f) is not None:
            out[f] = case[f]
    for name in out.pop("as_expected", None) or ():
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


def iter_file(path) -> Iterable[dict]:
    """Validated records of one JSON-lines file; errors name the file and line."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield validate(json.loads(line))
            except json.JSONDecodeError as e:
                raise RecordError(f"{path}:{lineno}: not a JSON object: {e.msg}") from None
            except RecordError as e:
                raise RecordError(f"{path}:{lineno}: {e}") from None


def read_results(paths) -> tuple[list[dict], list[dict]]:
    """(environments, results) of one or several results files, in file order; results are
    whole again (their case's arrays filled in from the file's case records)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return split(rec for p in paths for rec in _joined(iter_file(p)))


def _joined(records: Iterable[dict]) -> Iterable[dict]:
    """Results whole again: their case's fields and arrays filled in from the file's case
    records (within one file: case ids are a run's). Results written with their arrays inline
    (before case records existed) pass through as they are."""
    cases: dict[str, dict] = {}
    for rec in records:
        if rec["record"] == "case":
            cases[rec["case_id"]] = rec
        elif rec["record"] == "result" and rec["case_id"] in cases and rec.get("input") is None:
            yield _restore(rec, cases[rec["case_id"]])
        elif rec["record"] == "result" and rec.get("spec") is None:
            raise RecordError(f"result of case {rec['case_id']!r} has no spec and no case record before it")
        else:
            yield rec


def split(records: Iterable[dict]) -> tuple[list[dict], list[dict]]:
    envs, results = [], []
    for rec in records:
        if rec["record"] != "case":
            (envs if rec["record"] == "environment" else results).append(rec)
    return envs, results


def load(source) -> tuple[list[dict], list[dict]]:
    """(environments, results) from paths or from records already in memory (the plugin's)."""
    if isinstance(source, (str, os.PathLike)):
        return read_results([source])
    items = list(source)
    if items and all(isinstance(s, (str, os.PathLike)) for s in items):
        return read_results([Path(s) for s in items])
    try:
        return split(validate(r) for r in items)
    except RecordError as e:
        raise RecordError(f"in-memory record: {e}") from None
