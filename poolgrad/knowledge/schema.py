"""A findings file's ``[[finding]]`` table read into a Finding (SPEC.md, "Findings"): every field
checked, bad input named with its fix."""

from __future__ import annotations

import re
from pathlib import Path

from poolgrad.reference.properties import PROPERTIES
from poolgrad.verdicts import Policy

from .finding import NO_UPSTREAM, Finding, Reference
from .impacts import IMPACTS

POLICY_KEYS = ("tie", "nan", "nan_tie", "ftz", "padding", "order", "signed_zero", "init", "accumulate", "zero_sign", "tie_within", "passes")
CLAIM_VERDICTS = ("policy", "wrong", "nondeterministic", "error", "crash", "timeout", "unsupported", "undefined")
_FIELDS = {"id", "title", "framework", "variants", "devices", "ops", "dtypes", "when", "when_call", "cpu_features",
           "dtype_cpu_features", "kernel_features", "machine", "min_call_elements", "policy", "forward", "gradient", "verdict", "error", "behaviour",
           "source", "link", "upstream", "impact", "example", "since", "modes"}
MODES = ("backward", "jvp", "double_backward")
# Upstream references by what they are: a report of this behaviour, a fix (with its state),
# or related context (another bug in the same code, where the code came from).
REFERENCE_TYPES = ("report", "fix", "related")


class FindingsError(ValueError):
    pass


def _strings(fid, key, value, default) -> tuple[str, ...]:
    if value is None:
        return default
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise FindingsError(f"finding {fid!r}: field {key!r} must be a string or a list of strings")
    return tuple(value)


def _policy(fid, key, value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict) or set(value) - set(POLICY_KEYS):
        bad = sorted(set(value) - set(POLICY_KEYS)) if isinstance(value, dict) else [repr(value)]
        raise FindingsError(f"finding {fid!r}: field {key!r} is a table of policy keys ({', '.join(POLICY_KEYS)}); "
                            f"got {bad[0]}")
    try:
        Policy(**value)
    except TypeError as e:
        raise FindingsError(f"finding {fid!r}: field {key!r}: {e}") from None
    return dict(value)


def parse_finding(raw: dict, index: int, base: Path = Path()) -> Finding:
    fid = raw.get("id") or f"#{index}"
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise FindingsError(f"finding {fid!r}: unknown field {unknown[0]!r}; allowed: {', '.join(sorted(_FIELDS))}")
    for key in ("id", "title", "framework", "behaviour", "source"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise FindingsError(f"finding {fid!r}: field {key!r} is required (a non-empty string)")
    upstream = _upstream(fid, raw)
    reports = [r.url for r in upstream if r.type == "report"]
    link = reports[0] if reports else (raw.get("link") or NO_UPSTREAM).strip()
    if link != NO_UPSTREAM and not link.startswith("https://"):
        raise FindingsError(f"finding {fid!r}: field 'link' must be an https:// URL or {NO_UPSTREAM!r}")
    impact = raw.get("impact", "")
    if impact and impact not in IMPACTS:
        raise FindingsError(f"finding {fid!r}: field 'impact': unknown impact {impact!r}; allowed: {', '.join(IMPACTS)}")
    example = raw.get("example")
    if example is not None and (not isinstance(example, str) or not example.endswith(".json")):
        raise FindingsError(f"finding {fid!r}: field 'example' is the path of a case file (.json), relative to the findings file")
    example = base / example if example is not None else None
    when = _strings(fid, "when", raw.get("when"), ())
    when_call = _strings(fid, "when_call", raw.get("when_call"), ())
    for key, props in (("when", when), ("when_call", when_call)):
        unknown_props = [a.lstrip("!") for p in props for a in p.split("|") if a.lstrip("!") not in PROPERTIES]
        if unknown_props:
            raise FindingsError(f"finding {fid!r}: field {key!r}: unknown case property {unknown_props[0]!r}; "
                                f"known: {', '.join(PROPERTIES)}")
    policy = _policy(fid, "policy", raw.get("policy"))
    forward = {**policy, **_policy(fid, "forward", raw.get("forward"))}
    gradient = {**policy, **_policy(fid, "gradient", raw.get("gradient"))}
    verdict = raw.get("verdict", "policy" if forward or gradient else None)
    if verdict not in CLAIM_VERDICTS:
        raise FindingsError(f"finding {fid!r}: claim a policy (policy/forward/gradient tables) or a 'verdict' "
                            f"among {', '.join(CLAIM_VERDICTS[1:])}")
    if verdict == "policy" and not (forward or gradient):
        raise FindingsError(f"finding {fid!r}: verdict 'policy' needs a policy, forward or gradient table")
    if verdict != "policy" and (forward or gradient):
        raise FindingsError(f"finding {fid!r}: a {verdict!r} claim takes no policy tables")
    error = raw.get("error")
    if error is not None:
        if not isinstance(error, dict) or set(error) - {"type", "message"}:
            raise FindingsError(f"finding {fid!r}: field 'error' is {{type = \"NotImplementedError\", message = \"regex\"}}")
        try:
            re.compile(error.get("message", ""))
        except re.error as e:
            raise FindingsError(f"finding {fid!r}: field 'error.message' is not a regular expression: {e}") from None
        error = (_strings(fid, "error.type", error.get("type"), ("",)), error.get("message", ""))
    min_call = raw.get("min_call_elements", 0)
    if not isinstance(min_call, int) or isinstance(min_call, bool) or min_call < 0:
        raise FindingsError(f"finding {fid!r}: field 'min_call_elements' is a count of input elements")
    modes = _strings(fid, "modes", raw.get("modes"), ("backward",))
    if set(modes) - set(MODES):
        raise FindingsError(f"finding {fid!r}: field 'modes': unknown mode {sorted(set(modes) - set(MODES))[0]!r}; "
                            f"known: {', '.join(MODES)}")
    if "backward" not in modes and gradient:
        raise FindingsError(f"finding {fid!r}: a finding of modes {', '.join(modes)} claims the mode's policy with "
                            f"'forward' only; the reverse-mode gradient of the same call is claimed by the findings "
                            f"that list 'backward' (drop 'gradient'/'policy', or add 'backward' to 'modes')")
    dtypes = _strings(fid, "dtypes", raw.get("dtypes"), ("*",))
    per_dtype = raw.get("dtype_cpu_features", {})
    if not isinstance(per_dtype, dict) or set(per_dtype) - set(dtypes):
        raise FindingsError(f"finding {fid!r}: field 'dtype_cpu_features' is a table of dtypes the finding lists in "
                            f"'dtypes' ({', '.join(dtypes)}) to CPU features, e.g. {{float16 = [\"avx512_fp16\"]}}")
    dtype_cpu_features = tuple((d, _strings(fid, f"dtype_cpu_features.{d}", v, ())) for d, v in per_dtype.items())
    machine_facts = _machine_facts(fid, raw["framework"], raw.get("machine", {}))
    return Finding(
        id=fid, title=raw["title"].strip(), framework=raw["framework"],
        variants=_strings(fid, "variants", raw.get("variants"), ("*",)),
        devices=_strings(fid, "devices", raw.get("devices"), ("*",)),
        ops=_strings(fid, "ops", raw.get("ops"), ("*",)),
        dtypes=dtypes, dtype_cpu_features=dtype_cpu_features,
        when=when, when_call=when_call, cpu_features=_strings(fid, "cpu_features", raw.get("cpu_features"), ()),
        kernel_features=_strings(fid, "kernel_features", raw.get("kernel_features"), ()), machine_facts=machine_facts,
        min_call_elements=min_call,
        verdict=verdict, forward=forward, gradient=gradient, error=error, modes=modes,
        behaviour=" ".join(raw["behaviour"].split()), source=" ".join(raw["source"].split()),
        link=link, since=" ".join(str(raw.get("since", "")).split()),
        impact=impact, upstream=upstream, example=example)


def _machine_facts(fid: str, framework: str, raw) -> tuple[tuple[str, bool | str], ...]:
    """``machine = {name = value}``: facts the framework's environment must have, of those its
    record declares (Framework.dispatch); a framework not registered here is not checked."""
    from poolgrad.adapters import registry  # the registry reads entry points: only when asked

    fw = registry.FRAMEWORKS.get(framework)
    declared = fw.dispatch.facts if fw else ()
    named = ", ".join(declared) or "none"
    if not isinstance(raw, dict) or not all(isinstance(v, (bool, str)) for v in raw.values()):
        raise FindingsError(f"finding {fid!r}: field 'machine' is a table of facts to true/false or a string, "
                            f"e.g. {{{declared[0] if declared else 'fact'} = true}} (facts of {framework!r}: {named})")
    unknown = sorted(set(raw) - set(declared)) if fw else []
    if unknown:
        raise FindingsError(f"finding {fid!r}: field 'machine': {framework!r} declares no fact {unknown[0]!r}; "
                            f"its facts: {named} (its framework record's dispatch)")
    return tuple(sorted(raw.items()))


def _upstream(fid: str, raw: dict) -> tuple[Reference, ...]:
    """The typed references of ``upstream = [{type, url, title, state, note}, ...]`` ([]: no
    upstream report)."""
    if "upstream" in raw and "link" in raw:
        raise FindingsError(f"finding {fid!r}: give 'upstream' (typed references) or the older 'link', not both")
    refs = raw.get("upstream", [])
    if not isinstance(refs, list):
        raise FindingsError(f"finding {fid!r}: field 'upstream' is a list of {{type, url, title}} tables ([]: no upstream report)")
    out = []
    for i, ref in enumerate(refs):
        where = f"finding {fid!r}: upstream[{i}]"
        if not isinstance(ref, dict) or set(ref) - {"type", "url", "title", "state", "note"}:
            raise FindingsError(f"{where} is a table of type, url, title and, where they apply, state and note")
        if ref.get("type") not in REFERENCE_TYPES:
            raise FindingsError(f"{where}: field 'type' is one of {', '.join(REFERENCE_TYPES)}")
        if not str(ref.get("url", "")).startswith("https://"):
            raise FindingsError(f"{where}: field 'url' is an https:// URL")
        if ref["type"] == "fix" and not ref.get("state"):
            raise FindingsError(f"{where}: a fix needs its 'state' (\"merged in 2.5.0\", \"open\", \"closed unmerged\")")
        if ref["type"] == "related" and not ref.get("note"):
            raise FindingsError(f"{where}: a related thread needs a 'note' saying why it bears on the finding")
        out.append(Reference(**{k: " ".join(str(v).split()) for k, v in ref.items()}))
    return tuple(out)
