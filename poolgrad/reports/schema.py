"""The results format ``poolgrad-results/1`` (see poolgrad/reports/FORMAT.md): record kinds, their
fields, and a validator that names the file, line and field of the first problem.

Validation is structural (keys, types, enumerations); arrays are checked only as far as
"nested list or null" so reading 100,000 records stays fast — decode_array checks the cells.
"""

from __future__ import annotations

SCHEMA = "poolgrad-results/1"

VERDICTS = ("conforms", "reordered", "policy", "inconsistent", "inconsistent_indices", "inconsistent_modes", "wrong", "unsupported", "error", "crash",
            "timeout", "nondeterministic", "not_installed", "no_device")
# Verdicts of a result that ran: the framework's arrays are its behaviour.
RAN = ("conforms", "reordered", "policy", "inconsistent", "inconsistent_indices", "inconsistent_modes", "wrong", "nondeterministic")
# Verdicts that are not a divergence: the target agrees with the spec or did not run the case.
NOT_DIVERGENT = frozenset({"conforms", "reordered", "unsupported", "not_installed", "no_device"})
# Verdicts that say nothing about a target's behaviour (it did not run the case).
NOT_RUN = frozenset({"unsupported", "not_installed", "no_device"})
OUTCOMES = ("pass", "expected", "behaviour_changed", "fail", "skipped")
# What a case is, the same for every target: written once per case (a "case" record).
CASE_FIELDS = ("family", "op", "spec", "dtype", "shape", "input", "grad_output", "expected_forward",
               "expected_grad_input")
# A framework array and the case's reference array it is written against: a result record
# leaves out an array equal to the reference (``as_expected``) or writes only the cells that
# differ (``<name>_changes``: [flat index, value] pairs).
AGAINST_EXPECTED = {"forward": "expected_forward", "grad_input": "expected_grad_input"}
# Result fields that are the same for most targets of a case (the call's other cases are the
# group's, whatever the target): the case record holds the first result's value, and a result
# leaves the field out where it equals it.
CASE_DEFAULTS = ("call_properties", "call_shape", "run_id")
# Result fields a writer leaves out where they are derived: framework, variant and device from
# the target (framework-variant-device), empty lists as nothing to list.
FROM_TARGET = ("framework", "variant", "device")
EMPTY_AS_ABSENT = ("findings", "contradicts", "races", "differing_cells")
ARRAY_FIELDS = ("input", "grad_output", "forward", "expected_forward", "grad_input",
                "expected_grad_input", "indices",
                # AD modes: the mode's derivative (jvp's tangent output, double backward's by
                # grad_output), the reference's, and double backward's by the input
                "derivative", "expected_derivative", "grad_grad_input")

_STR, _NUM, _BOOL, _DICT, _LIST, _NONE = str, (int, float), bool, dict, list, type(None)
# Non-finite errors are written as the array strings ("inf", "nan"), see records.write_record.
_METRIC = (int, float, str, _NONE)

ENVIRONMENT_FIELDS = {
    "record": _STR, "schema": _STR, "run_id": _STR, "shard": (_STR, _NONE),
    "suite_version": _STR, "suite_commit": (_STR, _NONE), "date": _STR, "python": _STR,
    "numpy": _STR, "platform": _STR, "cpu": _STR, "cpu_features": (_LIST, _NONE),
    "frameworks": _DICT, "env_switches": _DICT,
}
RESULT_FIELDS = {
    "record": _STR, "run_id": _STR, "case_id": _STR, "family": _STR, "op": _STR, "spec": _DICT,
    "dtype": _STR, "framework": _STR, "framework_version": _STR, "variant": _STR, "device": _STR,
    "target": _STR, "verdict": _STR, "policy": (_DICT, _NONE), "forward_policy": (_DICT, _NONE),
    "valid_subgradient": (_BOOL, _NONE), "findings": (_LIST, _NONE), "contradicts": (_LIST, _NONE),
    "races": (_LIST, _NONE),
    # "expected": the one known-divergence entry of results written before the knowledge base
    "expected": (_DICT, _NONE), "outcome": _STR,
    # the worst impact of the findings that explain it (knowledge.impacts.IMPACTS; null: none stated)
    "impact": (_STR, _NONE),
    **{name: (_LIST, _NONE) for name in ARRAY_FIELDS},
    "max_abs_error": _METRIC, "max_ulp_error": _METRIC, "differing_cells": (_LIST, _NONE),
    "message": _STR, "framework_message": (_STR, _NONE), "shape": (_LIST, _NONE),
    "call_properties": (_LIST, _NONE), "duration_s": (*_NUM, _NONE), "call_shape": (_LIST, _NONE),
    "mode": _STR,   # "backward" (reverse mode; absent in older results), "jvp", "double_backward"
    "as_expected": (_LIST, _NONE), **{f"{name}_changes": (_LIST, _NONE) for name in AGAINST_EXPECTED},
}
# Fields a writer may leave out; they read as null.
OPTIONAL = frozenset({*ARRAY_FIELDS, "impact", "max_abs_error", "max_ulp_error", "differing_cells",
                      "forward_policy", "valid_subgradient", "findings", "contradicts", "races", "expected", "framework_message", "shape", "call_properties", "duration_s",
                      "call_shape", "mode", "as_expected", *(f"{name}_changes" for name in AGAINST_EXPECTED),
                      # written once per case, in its case record (read back into each result)
                      "family", "op", "spec", "dtype", "shape", "run_id", *FROM_TARGET})
# A finding's summary, written once per file before the first result it explains; results
# name it by id.
FINDING_FIELDS = {"record": _STR, "id": _STR, "title": _STR, "link": _STR, "impact": _STR,
                  "upstream": _LIST}  # typed references: {type, url, title, state, note}
# Finding fields that results written before them lack.
FINDING_OPTIONAL = frozenset({"impact", "upstream"})
# Result fields whose texts repeat: a writer writes each text once, as a ``text`` record, and
# the result names its integer id.
TEXT_FIELDS = ("target", "verdict", "message", "framework_message")
TEXT_RECORD_FIELDS = {"record": _STR, "id": int, "text": _STR}
# (case, target) pairs the target has no call for (its framework's plan): one record per
# target and reason, naming the cases; read back as one ``unsupported`` result per case.
UNSUPPORTED_FIELDS = {"record": _STR, "run_id": _STR, "target": _STR, "framework_version": (_STR, _NONE),
                      "reason": _STR, "case_ids": _LIST}


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
        _check_fields(rec, UNSUPPORTED_FIELDS, frozenset({"framework_version"}))
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
