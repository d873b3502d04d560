"""Case files (format ``poolgrad-cases/1``, see poolgrad/cases/FORMAT.md): users' own cases as JSON.

Only ``json.load`` touches the file: nothing in it is evaluated, unpickled or imported. Every
problem is reported as one :class:`CaseFileError` line naming the file, the case and the field.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from poolgrad.json_values import SPECIAL, encode_array, shape_of, to_float64
from poolgrad.reference import PoolSpec, SpecError, output_shape
from poolgrad.reference.spec import FIELDS

from .model import Case, make_case

FORMAT = "poolgrad-cases/1"
_SPEC_KEYS = {*FIELDS, "rank"}
_CASE_KEYS = {"id", "family", "input", "grad_output", "shape", *_SPEC_KEYS}
_TOP_KEYS = {"format", "cases", "description"}
DEFAULT_DTYPE = "float32"


class CaseFileError(ValueError):
    """A case file that cannot be used. ``case`` is the case id (or ``#index`` when the case
    has no usable id, None for the file as a whole); ``field`` the offending key."""

    def __init__(self, path, case, field, problem):
        self.path, self.case, self.field, self.problem = str(path), case, field, problem
        where = "" if case is None else (f" case {case}" if case.startswith("#") else f" case {case!r}")
        super().__init__(" ".join(f"{path}:{where}: {field}: {problem}".split()))


_JSON_TO_STRING = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}


def _reject_constant(name):
    """Python's json reads NaN and Infinity, which are not JSON: refuse them."""
    raise ValueError(f'{name} is not JSON; write the string "{_JSON_TO_STRING[name]}"')


def _scalar(field, v, where):
    if isinstance(v, str):
        if v not in SPECIAL:
            raise SpecError(field, f"{where} is the string {v[:40]!r}; the only strings allowed are "
                            f"{', '.join(map(repr, SPECIAL))}")
        return SPECIAL[v]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SpecError(field, f"{where} is {type(v).__name__}, not a number")
    try:
        return float(v)
    except OverflowError:
        raise SpecError(field, f"{where} is an integer too large for float64") from None


def _flatten(field, value, shape, out, where=""):
    """Append the scalars of ``value`` to ``out``, checking it has exactly ``shape``;
    ``where`` is the index path so far, e.g. [0][1][2]."""
    if not shape:
        if isinstance(value, list):
            raise SpecError(field, f"ragged nested list: {where} is a list where a number was expected")
        out.append(_scalar(field, value, where or "the value"))
        return
    if not isinstance(value, list):
        raise SpecError(field, f"ragged nested list: {where or 'the value'} is not a list where a list of "
                        f"{shape[0]} was expected")
    if len(value) != shape[0]:
        raise SpecError(field, f"ragged nested list: {where or 'the top list'} has {len(value)} items, "
                        f"expected {shape[0]}")
    for i, item in enumerate(value):
        _flatten(field, item, shape[1:], out, f"{where}[{i}]")


def _array(field: str, value, max_elements: int, empty_shape=None) -> np.ndarray:
    """A nested list as a float64 array (numbers parsed as float64; the caller rounds them to
    the dtype). An empty list takes ``empty_shape``: it carries no shape of its own."""
    shape = shape_of(value)
    if len(shape) > 5:  # also bounds the recursion of _flatten
        raise SpecError(field, f"nested {len(shape)} deep; the shape is (N, C, *spatial) with 1-3 spatial dims")
    size = math.prod(shape)
    if size > max_elements:
        raise SpecError(field, f"{size} elements, more than the limit of {max_elements} (max_elements)")
    try:
        arr = to_float64(value)
    except ValueError as e:
        _flatten(field, value, shape, [])  # names where in the array
        raise SpecError(field, str(e)) from None
    if size == 0 and empty_shape is not None and math.prod(empty_shape) == 0:
        arr = arr.reshape(empty_shape)
    return arr


def _declared_shape(entry: dict):
    shape = entry.get("shape")
    if shape is not None and not (isinstance(shape, list) and all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)):
        raise SpecError("shape", f"must be a list of non-negative integers, got {shape!r}")
    return None if shape is None else tuple(shape)


def _case(entry: dict, max_elements: int, known: dict) -> Case:
    """``known``: what earlier cases of the file resolved (specs by their keys, output shapes
    by spec and input shape); a file's cases share a few specs and shapes."""
    keys = {"dtype": DEFAULT_DTYPE, **{k: v for k, v in entry.items() if k in _SPEC_KEYS}}
    text = repr(keys)
    spec = known.get(text)
    if spec is None:
        spec = known[text] = PoolSpec.from_dict(keys)
    if "input" not in entry:
        raise SpecError("input", "missing; a nested list of shape (N, C, *spatial)")
    declared = _declared_shape(entry)
    x = _array("input", entry["input"], max_elements, declared)
    if declared is not None and x.shape != declared:
        raise SpecError("shape", f"says {list(declared)} but the input has shape {list(x.shape)}")
    if x.ndim not in (3, 4, 5):
        raise SpecError("input", f"must have shape (N, C, *spatial) with 1, 2 or 3 spatial dims, "
                        f"got shape {x.shape}")
    if spec.rank is None:
        spec = dataclasses.replace(spec, rank=x.ndim - 2)
    out_shape = known.get((spec, x.shape))
    if out_shape is None:
        out_shape = known[spec, x.shape] = output_shape(spec, x.shape)
    g = None
    if entry.get("grad_output") is not None:
        g = _array("grad_output", entry["grad_output"], max_elements, out_shape)
        if g.shape != out_shape:
            raise SpecError("grad_output", f"must have the forward output's shape {out_shape}, got {g.shape}")
    family = entry.get("family", "user")
    if not isinstance(family, str) or not family:
        raise SpecError("family", f"must be a non-empty string, got {family!r}")
    return make_case(entry["id"], family, spec, x, g)


def _load_json(path: Path):
    try:
        with path.open(encoding="utf-8") as f:
            return json.load(f, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise CaseFileError(path, None, "json", f"not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError as e:  # a NaN/Infinity literal, or bytes that are not UTF-8
        raise CaseFileError(path, None, "json", f"not JSON: {e}") from None
    except RecursionError:
        raise CaseFileError(path, None, "json", "not JSON this suite reads: nested too deeply") from None
    except OSError as e:
        raise CaseFileError(path, None, "file", f"cannot be read: {e.strerror or e}") from None


def _case_id(entry, seen: set) -> str:
    """The case's id, checked: a non-empty one-line string not used before in the file."""
    cid = entry.get("id")
    if cid is None:
        raise SpecError("id", "missing; every case needs a unique string id")
    if not isinstance(cid, str) or not cid or not cid.isprintable():
        raise SpecError("id", f"must be a non-empty one-line string, got {cid!r}")
    if cid in seen:
        raise SpecError("id", f"duplicate id {cid!r}; ids must be unique within the file")
    return cid


def load_case_file(path, max_elements: int = 1_000_000) -> list[Case]:
    """The cases of a ``poolgrad-cases/1`` file; ``max_elements`` bounds each array."""
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, dict):
        raise CaseFileError(path, None, "format", f'the top level must be an object {{"format": "{FORMAT}", "cases": [...]}}')
    if data.get("format") != FORMAT:
        raise CaseFileError(path, None, "format", f"must be {FORMAT!r}, got {data.get('format')!r}")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise CaseFileError(path, None, unknown[0], f"unknown top-level key; allowed: {', '.join(sorted(_TOP_KEYS))}")
    if not isinstance(data.get("cases"), list):
        raise CaseFileError(path, None, "cases", "must be a list of case objects")
    cases, seen, known = [], set(), {}
    for index, entry in enumerate(data["cases"]):
        label = f"#{index}"
        try:
            if not isinstance(entry, dict):
                raise SpecError("case", f"must be an object, got {type(entry).__name__}")
            label = _case_id(entry, seen)
            unknown = sorted(set(entry) - _CASE_KEYS)
            if unknown:
                raise SpecError(unknown[0], "unknown key; allowed: id, family, input, grad_output, "
                                f"shape and the spec keys {', '.join(FIELDS)}")
            cases.append(_case(entry, max_elements, known))
        except SpecError as e:
            raise CaseFileError(path, label, e.field, e.problem) from None
        seen.add(label)
    return cases


def case_to_dict(case: Case) -> dict:
    entry = {"id": case.id, "family": case.family, **case.spec.to_dict(), "input": encode_array(case.input)}
    if case.input.size == 0:
        entry["shape"] = list(case.input.shape)
    entry["grad_output"] = encode_array(case.grad_output)
    return entry


def write_case_file(cases, path, description: str | None = None) -> None:
    """Write ``cases`` so that :func:`load_case_file` gives them back bit for bit."""
    lines = ",\n".join(json.dumps(case_to_dict(c)) for c in cases)
    about = "" if description is None else f'\n "description": {json.dumps(description)},'
    Path(path).write_text(f'{{"format": "{FORMAT}",{about} "cases": [\n{lines}\n]}}\n', encoding="utf-8")
