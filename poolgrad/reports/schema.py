"""The results format ``poolgrad-results/1`` (see poolgrad/reports/FORMAT.md): record kinds, their
fields, and a validator that names the file, line and field of the first problem.

Validation is structural (keys, types, enumerations); arrays are checked only as far as
"nested list or null" so reading 100,000 records stays fast — decode_array checks the cells.
"""

from __future__ import annotations

import dataclasses
import typing

from poolgrad.verdicts.verdict import VERDICTS

SCHEMA = "poolgrad-results/1"

# Verdicts of a result that ran: the framework's arrays are its behaviour.
RAN = ("conforms", "reordered", "policy", "inconsistent", "inconsistent_indices", "inconsistent_modes", "wrong", "nondeterministic")
# Verdicts that are not a divergence: the target agrees with the spec or did not run the case.
NOT_DIVERGENT = frozenset({"conforms", "reordered", "unsupported", "not_installed", "no_device", "not_run"})
# Verdicts that say nothing about a target's behaviour (it did not run the case).
NOT_RUN = frozenset({"unsupported", "not_installed", "no_device", "not_run"})
OUTCOMES = ("pass", "expected", "behaviour_changed", "fail", "skipped")


def _field(*roles: str, required: bool = False, against: str | None = None, default=None):
    """A result field: ``roles`` say how a writer treats it (Result), ``required`` that a record
    must have it, ``against`` the case's reference array it is written against."""
    return dataclasses.field(default=default, metadata={"roles": frozenset(roles), "required": required,
                                                        "against": against})


_Metric = typing.Union[int, float, str, None]  # non-finite errors are the array strings ("inf", "nan")


@dataclasses.dataclass(kw_only=True)
class Result:
    """A result record: one (case, target) check in one mode. Its fields are the schema: their
    types are what a record may hold (validate), their roles how a writer writes them
    (ResultsWriter, records.against_case):

    - ``case``: what a case is, the same for every target, written once per case (a ``case``
      record);
    - ``case_default``: the same for most targets of a case (the call's other cases are the
      group's, whatever the target): the case record holds the first result's value, and a
      result leaves the field out where it equals it;
    - ``from_target``: left out where derived from the target (framework-variant-device);
    - ``empty_as_absent``: an empty list is left out (nothing to list);
    - ``array``: an array (nested lists in channels-first layout, records.py);
    - ``text``: a repeating text, written once as a ``text`` record and named by its id.

    A framework array ``against`` a reference array is left out where it is the reference's (the
    check names it in ``as_expected``) or written as the cells that differ (``<name>_changes``:
    [flat index, value] pairs)."""

    record: str = _field(required=True, default="result")
    run_id: str = _field("case_default")
    case_id: str = _field(required=True)
    family: str = _field("case")
    op: str = _field("case")
    spec: dict = _field("case")
    dtype: str = _field("case")
    shape: list | None = _field("case")
    framework: str = _field("from_target")
    framework_version: str = _field(required=True)
    variant: str = _field("from_target")
    device: str = _field("from_target")
    target: str = _field("text", required=True)
    verdict: str = _field("text", required=True)
    policy: dict | None = _field(required=True)
    forward_policy: dict | None = _field()
    valid_subgradient: bool | None = _field()
    findings: list | None = _field("empty_as_absent")
    contradicts: list | None = _field("empty_as_absent")
    races: list | None = _field("empty_as_absent")
    # the one known-divergence entry of results written before the knowledge base
    expected: dict | None = _field()
    outcome: str = _field(required=True)
    # the worst impact of the findings that explain it (knowledge.impacts.IMPACTS; null: none stated)
    impact: str | None = _field()
    input: list | None = _field("case", "array")
    grad_output: list | None = _field("case", "array")
    forward: list | None = _field("array", against="expected_forward")
    expected_forward: list | None = _field("case", "array")
    grad_input: list | None = _field("array", against="expected_grad_input")
    expected_grad_input: list | None = _field("case", "array")
    indices: list | None = _field("array")
    # AD modes: the mode's derivative (jvp's tangent output, double backward's by grad_output),
    # the reference's, and double backward's by the input
    derivative: list | None = _field("array")
    expected_derivative: list | None = _field("array")
    grad_grad_input: list | None = _field("array")
    max_abs_error: _Metric = _field()
    max_ulp_error: _Metric = _field()
    differing_cells: list | None = _field("empty_as_absent")
    message: str = _field("text", required=True)
    framework_message: str | None = _field("text")
    call_properties: list | None = _field("case_default")
    duration_s: int | float | None = _field()
    call_shape: list | None = _field("case_default")
    mode: str = _field()   # "backward" (reverse mode; absent in older results), "jvp", "double_backward"
    # the arrays (of those written against a reference array) that are the reference's
    as_expected: list | None = _field()
    forward_changes: list | None = _field()
    grad_input_changes: list | None = _field()

    def to_record(self) -> dict:
        """The record, a JSON-ready dict: every field, null where unset, except a field that is
        never null (a reverse-mode result has no mode), which is left out."""
        return {name: v for name, v in self.__dict__.items() if v is not None or name not in _NEVER_NULL}


_RESULT = dataclasses.fields(Result)
_HINTS = typing.get_type_hints(Result)


def _named(role: str) -> tuple[str, ...]:
    return tuple(f.name for f in _RESULT if role in f.metadata["roles"])


def _json_types(hint) -> tuple:
    """The JSON values a field's annotation allows (str | None: a string or null)."""
    return typing.get_args(hint) or (hint,)


CASE_FIELDS = _named("case")
CASE_DEFAULTS = _named("case_default")
FROM_TARGET = _named("from_target")
EMPTY_AS_ABSENT = _named("empty_as_absent")
ARRAY_FIELDS = _named("array")
TEXT_FIELDS = _named("text")
AGAINST_EXPECTED = {f.name: f.metadata["against"] for f in _RESULT if f.metadata["against"]}
RESULT_FIELDS = {f.name: _json_types(_HINTS[f.name]) for f in _RESULT}
# Fields a writer may leave out; they read as null.
OPTIONAL = frozenset(f.name for f in _RESULT if not f.metadata["required"])
_NEVER_NULL = frozenset(name for name, types in RESULT_FIELDS.items() if type(None) not in types)

_STR, _DICT, _LIST, _NONE = str, dict, list, type(None)

ENVIRONMENT_FIELDS = {
    "record": _STR, "schema": _STR, "run_id": _STR, "shard": (_STR, _NONE),
    "suite_version": _STR, "suite_commit": (_STR, _NONE), "date": _STR, "python": _STR,
    "numpy": _STR, "platform": _STR, "cpu": _STR, "cpu_features": (_LIST, _NONE),
    "frameworks": _DICT, "env_switches": _DICT,
}
# A finding's summary, written once per file before the first result it explains; results
# name it by id.
FINDING_FIELDS = {"record": _STR, "id": _STR, "title": _STR, "link": _STR, "impact": _STR,
                  "upstream": _LIST}  # typed references: {type, url, title, state, note}
# Finding fields that results written before them lack.
FINDING_OPTIONAL = frozenset({"impact", "upstream"})
# A result's repeating text (TEXT_FIELDS), written once; results name its integer id.
TEXT_RECORD_FIELDS = {"record": _STR, "id": int, "text": _STR}
# (case, target) pairs the target has no call for (its framework's plan): one record per
# target and reason, naming the cases; read back as one ``unsupported`` result per case.
UNSUPPORTED_FIELDS = {"record": _STR, "run_id": _STR, "target": _STR, "framework_version": (_STR, _NONE),
                      "reason": _STR, "case_ids": _LIST, "verdict": _STR}
# An unsupported record's verdict: the path has no call, or its call is not made (undefined).
UNSUPPORTED_VERDICTS = ("unsupported", "not_run")


class RecordError(ValueError):
    """A record that does not follow poolgrad-results/1."""


def _type_name(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    names = {"str": "string", "int": "number", "float": "number", "dict": "object", "list": "list",
             "bool": "true/false", "NoneType": "null"}
    return " or ".join(dict.fromkeys(names[t.__name__] for t in types))


# Machine fields of the environment that results written before they existed lack.
ENVIRONMENT_OPTIONAL = frozenset({"cpu_features"})


def _environment_fields() -> dict:
    """ENVIRONMENT_FIELDS, and the top-level fields older files carry for a framework's dispatch
    (Dispatch.older_environment_fields: now its environment's), which a reader accepts."""
    from poolgrad.adapters import registry  # the registry reads entry points: only when asked

    older = {f for fw in registry.FRAMEWORKS.values() for f in fw.dispatch.older_environment_fields}
    return {**ENVIRONMENT_FIELDS, **{f: (_STR, _NONE) for f in sorted(older)}}


def _check_fields(rec: dict, fields: dict, optional: frozenset) -> None:
    unknown = sorted(set(rec) - set(fields))
    if unknown:
        raise RecordError(f"unknown field {unknown[0]!r} (schema {SCHEMA})")
    for name, types in fields.items():
        if name not in rec:
            if name in optional:
                continue
            raise RecordError(f"field {name!r} is missing")
        value = rec[name]
        # bool is an int subclass: only fields that allow bool accept it.
        if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            raise RecordError(f"field {name!r} must be {_type_name(types)}, got {value!r}")
        if not isinstance(value, types):
            raise RecordError(f"field {name!r} must be {_type_name(types)}, got {type(value).__name__}")


def validate(rec) -> dict:
    """Check one record; returns it with optional fields filled with null."""
    if not isinstance(rec, dict):
        raise RecordError(f"a record is a JSON object, got {type(rec).__name__}")
    kind = rec.get("record")
    if kind == "environment":
        fields = _environment_fields()
        _check_fields(rec, fields, ENVIRONMENT_OPTIONAL | (fields.keys() - ENVIRONMENT_FIELDS.keys()))
        if rec["schema"] != SCHEMA:
            raise RecordError(f"field 'schema': this reader understands {SCHEMA!r}, got {rec['schema']!r}")
        return {**{name: None for name in ENVIRONMENT_OPTIONAL}, **rec}
    if kind == "case":
        _check_fields(rec, {"record": _STR, "case_id": _STR, **{f: RESULT_FIELDS[f] for f in CASE_FIELDS + CASE_DEFAULTS}},
                      frozenset(CASE_FIELDS + CASE_DEFAULTS))
        return rec
    if kind == "finding":
        _check_fields(rec, FINDING_FIELDS, FINDING_OPTIONAL)
        return rec
    if kind == "unsupported":
        _check_fields(rec, UNSUPPORTED_FIELDS, frozenset({"framework_version", "verdict"}))
        if rec.get("verdict", "unsupported") not in UNSUPPORTED_VERDICTS:
            raise RecordError(f"field 'verdict': an unsupported record's is one of {', '.join(UNSUPPORTED_VERDICTS)}, "
                              f"got {rec['verdict']!r}")
        return rec
    if kind == "text":
        _check_fields(rec, TEXT_RECORD_FIELDS, frozenset())
        return rec
    if kind != "result":
        raise RecordError(f"field 'record' must be 'environment', 'case', 'finding', 'unsupported', 'text' or "
                          f"'result', got {kind!r}")
    _check_fields(rec, RESULT_FIELDS, OPTIONAL)
    if isinstance(rec.get("target"), str) and not any(f in rec for f in FROM_TARGET):
        rec = {**target_fields(rec["target"]), **rec}
    if rec["verdict"] not in VERDICTS:
        raise RecordError(f"field 'verdict': unknown {rec['verdict']!r}; allowed: {', '.join(VERDICTS)}")
    if rec["outcome"] not in OUTCOMES:
        raise RecordError(f"field 'outcome': unknown {rec['outcome']!r}; allowed: {', '.join(OUTCOMES)}")
    target = f"{rec['framework']}-{rec['variant']}-{rec['device']}"
    if rec["target"] != target:
        raise RecordError(f"field 'target' must be framework-variant-device ({target!r}), got {rec['target']!r}")
    # A case default left out is its case record's (reports.records puts it back), not null.
    return {**{name: None for name in OPTIONAL if name not in CASE_DEFAULTS}, "mode": "backward", **rec}


def target_fields(target: str) -> dict:
    """framework, variant and device of a target id: a framework name has no '-', a device
    none either; the variant is what lies between."""
    framework, rest = target.split("-", 1) if "-" in target else (target, "")
    variant, _, device = rest.rpartition("-")
    return {"framework": framework, "variant": variant, "device": device}


# The derivative a result checked: the reverse mode, or an AD mode (absent in older results).
MODES = ("backward", "jvp", "double_backward")


def mode_of(rec: dict) -> str:
    return rec.get("mode") or "backward"


def case_label(rec: dict) -> str:
    """A result's case as reports name it: its id, with the AD mode where it is not the reverse
    mode (one case has a result per target and mode)."""
    mode = mode_of(rec)
    return rec["case_id"] if mode == "backward" else f"{rec['case_id']} [{mode}]"


def is_divergence(rec: dict) -> bool:
    return rec["verdict"] not in NOT_DIVERGENT
