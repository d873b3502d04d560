"""The knowledge base: what each framework path does where it departs from the spec.

Each framework package's ``findings.toml`` (``poolgrad/adapters/<framework>/``, a plugin's beside its
planner) holds one curated entry per behaviour of a framework path,
written for the people who maintain the kernel: what it does, why (the kernel source), the
upstream report or "no upstream report". Its scope names the target (framework, variants,
devices), the ops and dtypes (globs), the machine that decides it (CPU features, and the
features the framework's kernels may use and the facts its environment declares: Machine), and
the *properties of the case* that trigger it (poolgrad/reference/properties.py), so a user's case is
judged like the catalogue's. Its claim is a partial policy for the forward and/or the
gradient (checked by re-running the reference under it), or a verdict (an error by type and
message pattern). The releases a finding holds for come from the release lanes' history
(each framework's history.json beside its findings, see poolgrad/cases/history.py), never from
the entry itself.

Judging one (case, target) result (:meth:`Knowledge.judge`): the findings in scope compose
(their partial policies merge), so a case with NaNs *and* subnormals is explained by the two
findings together; a divergence that the findings in scope explain is ``expected``; one that
they do not explain is ``behaviour_changed``; one with no finding in scope is ``fail``. A
conforming result never fails; a finding in scope that predicted a divergence there is
reported as contradicted (the release fixed it, or its scope is too wide).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import importlib.util
import itertools
import re
import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from poolgrad.reference.properties import PROPERTIES
from poolgrad.verdicts import Policy

from .history import load_history, merged, version_range

DATA = Path(__file__).parent / "data"
DEFAULT_PATH = DATA / "findings.toml"
# load()'s default history: every framework package's history.json, united
FRAMEWORK_HISTORIES = "frameworks"

POLICY_KEYS = ("tie", "nan", "nan_tie", "ftz", "padding", "order", "signed_zero", "init", "accumulate", "zero_sign")
CLAIM_VERDICTS = ("policy", "wrong", "nondeterministic", "error", "crash", "timeout", "unsupported")
_FIELDS = {"id", "title", "framework", "variants", "devices", "ops", "dtypes", "when", "when_call", "cpu_features",
           "dtype_cpu_features", "kernel_features", "machine", "min_call_elements", "policy", "forward", "gradient", "verdict", "error", "behaviour",
           "source", "link", "upstream", "impact", "example", "since", "modes"}
MODES = ("backward", "jvp", "double_backward")
NO_UPSTREAM = "no upstream report"
# What a behaviour means for training, from harmless to worst: ``--fail-on IMPACT`` fails the
# results that findings explain with an impact at or above IMPACT.
IMPACTS = {
    "valid_subgradient": "a tie choice only: still a valid subgradient",
    "rounding": "sums rounded in low precision or in another order: small numeric differences",
    "nan_semantics": "a NaN appears or vanishes, or an infinity is handled otherwise",
    "gradient_lost": "a window routes nothing, or less than its upstream gradient",
    "gradient_misrouted": "gradient lands outside its window, or in another sample or channel",
    "wrong_forward": "the forward value is wrong",
    "error": "the call raises where the spec has a result",
    "crash": "the process dies or hangs",
}
# Upstream references by what they are: a report of this behaviour, a fix (with its state),
# or related context (another bug in the same code, where the code came from).
REFERENCE_TYPES = ("report", "fix", "related")
IMPACT_RANK = {name: i for i, name in enumerate(IMPACTS)}  # harmless to worst


@dataclasses.dataclass(frozen=True)
class Reference:
    type: str
    url: str
    title: str = ""
    state: str = ""   # a fix's: "merged in 2.5.0", "open", "closed unmerged", ...
    note: str = ""    # why a related thread bears on the finding


class FindingsError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Finding:
    id: str
    title: str
    framework: str
    variants: tuple[str, ...]
    devices: tuple[str, ...]
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    when: tuple[str, ...]              # case properties that must all hold ("!name": must not)
    when_call: tuple[str, ...]         # properties of some case of the same framework call
    cpu_features: tuple[str, ...]      # "avx512f" must be present, "!avx512f" absent
    # Per dtype, CPU features the dtype is in scope on (where a kernel library takes a dtype
    # only on some CPUs): ((dtype, requirements), ...); the other dtypes hold on every CPU.
    dtype_cpu_features: tuple[tuple[str, tuple[str, ...]], ...]
    kernel_features: tuple[str, ...]   # the same, over the features the framework's kernels may use
    machine_facts: tuple[tuple[str, bool | str], ...]  # facts the framework's environment must have
    min_call_elements: int             # the framework call (cases stacked) has at least this many
    verdict: str                       # "policy" or the claimed verdict
    forward: dict                      # partial policies (keys of verdicts.Policy)
    gradient: dict
    error: tuple[tuple[str, ...], str] | None  # (exception types, message regex) of a failure claim
    behaviour: str
    source: str
    link: str
    since: str
    versions: SpecifierSet = SpecifierSet()
    impact: str = ""
    upstream: tuple[Reference, ...] = ()
    example: Path | None = None        # a small case file showing the behaviour
    # The derivatives it is about: "backward" (reverse mode), "jvp", "double_backward"; how its
    # claim reads in each: :meth:`in_mode`.
    modes: tuple[str, ...] = ("backward",)

    # -- scope ---------------------------------------------------------------------------
    def in_target(self, framework: str, variant: str, device: str, version: str, machine: "Machine") -> bool:
        return (framework == self.framework and _any(variant, self.variants)
                and _any(device, self.devices) and version_in(str(self.versions), version)
                and _features_hold(self.cpu_features, machine.cpu_features)
                and _features_hold(self.kernel_features, machine.kernel_features(framework))
                and all(machine.facts(framework).get(k) == v for k, v in self.machine_facts))

    def on_machine(self, machine: "Machine") -> "Finding | None":
        """The finding less the dtypes whose ``dtype_cpu_features`` this machine's CPU does not
        meet; None where no dtype is left."""
        dropped = {d for d, required in self.dtype_cpu_features if not _features_hold(required, machine.cpu_features)}
        if not dropped:
            return self
        kept = tuple(d for d in self.dtypes if d not in dropped)
        return dataclasses.replace(self, dtypes=kept) if kept else None

    def in_scope(self, op: str, dtype: str, properties: frozenset[str], call_elements: int = 0,
                 call_properties=lambda: frozenset()) -> bool:
        """``call_properties()``: the properties of every case of the framework call, united
        (asked only by a finding with ``when_call``: a kernel that writes across cases)."""
        return (_any(op, self.ops) and _any(dtype, self.dtypes) and _features_hold(self.when, properties)
                and call_elements >= self.min_call_elements
                and (not self.when_call or _features_hold(self.when_call, call_properties())))

    def matches_failure(self, verdict: str, message: str) -> bool:
        """A failure claim: the verdict, and for error/crash the type and message. A "wrong"
        claim says only that the path diverges there by no fixed rule: any divergent result
        that ran (whatever policy the search happens to name for it) matches, in an AD mode also
        one whose modes disagree (inconsistent_modes: one side follows no rule), and one whose
        indices point at no element of the forward (inconsistent_indices). A "nondeterministic"
        claim (adds that race, as GPU atomics do) matches what "wrong" does, results that differ
        between repeats, and a conforming result too: the race can land on the spec's order."""
        diverged = ("policy", "inconsistent", "inconsistent_modes", "inconsistent_indices", "wrong")
        if self.verdict == "wrong":
            return verdict in diverged
        if self.verdict == "nondeterministic":
            return verdict in (*diverged, "nondeterministic", "conforms")
        if verdict != self.verdict:
            return False
        if self.error is None:
            return True
        kinds, pattern = self.error
        return message.startswith(kinds) and re.search(pattern, message) is not None

    @property
    def claims_policy(self) -> bool:
        return self.verdict == "policy"

    @property
    def specificity(self) -> int:
        """How many conditions its scope sets (the judge's credit: the most specific claim that
        explains a result takes it): each case or call property, and each of ops, dtypes,
        variants, devices, CPU or kernel features, machine facts and call size it restricts."""
        restricted = (self.ops, self.dtypes, self.variants, self.devices)
        return (len(self.when) + len(self.when_call) + sum("*" not in r for r in restricted)
                + len(self.cpu_features) + len(self.kernel_features) + len(self.machine_facts)
                + bool(self.min_call_elements))

    def in_mode(self, mode: str) -> "Finding | None":
        """The finding as a claim on a record of ``mode`` (None: it claims nothing there), with
        ``forward`` the policy of the record's own derivative and ``gradient`` the reverse mode's.

        A record of an AD mode holds the mode's derivative and the reverse-mode gradient of the
        same call. That gradient is the reverse mode's, so every finding that lists "backward"
        claims it with its ``gradient`` (its ``forward`` is the forward pass, which the record
        does not judge). The mode's own policy comes from the findings that list the mode: the
        ``forward`` of one that does not list "backward" (the mode runs its own kernel), the
        ``gradient`` of one that does (the mode follows the gradient's selection). A failure
        claim holds in the modes it lists."""
        if mode == "backward" or not self.claims_policy:
            return self if mode in self.modes else None
        if "backward" not in self.modes:
            return dataclasses.replace(self, modes=(mode,)) if mode in self.modes else None
        own = self.gradient if mode in self.modes else {}
        if not (own or self.gradient):
            return None
        return dataclasses.replace(self, forward=own, modes=(mode,))

    def claim_text(self) -> str:
        if self.claims_policy:
            first = "forward" if "backward" in self.modes else "/".join(self.modes)
            parts = [f"{side} {policy_text(p)}" for side, p in ((first, self.forward), ("gradient", self.gradient)) if p]
            return "policy: " + "; ".join(parts)
        if self.error:
            return f"{self.verdict}: {'|'.join(self.error[0])} /{self.error[1]}/"
        return self.verdict

    def summary(self) -> dict:
        """What a results record carries of the finding that explained it: ``link`` (its first
        report, or "no upstream report") and, where it has any, its typed upstream references
        (their empty fields left out)."""
        refs = [{k: v for k, v in dataclasses.asdict(r).items() if v} for r in self.upstream]
        return {"id": self.id, "title": self.title, "link": self.link, **({"upstream": refs} if refs else {})}


def policy_text(p: dict) -> str:
    """A (partial) policy as people read it: ``tie=last, nan=propagate``."""
    return ", ".join(f"{k}={v}" for k, v in p.items())


@functools.lru_cache(maxsize=4096)
def _any(value: str, patterns: tuple[str, ...]) -> bool:
    # Asked for every finding of a target on every result: a few ops and dtypes, many times.
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


def _features_hold(required, present: frozenset[str]) -> bool:
    """Every requirement holds: "name" present, "!name" absent, "a|b" either present."""
    return all((r[1:] not in present) if r.startswith("!") else any(a in present for a in r.split("|"))
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


# -- the machine ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Machine:
    """What decides ISA-dependent behaviour: the CPU's features and, per framework, what its
    environment decides of its kernels (poolgrad/adapters/framework.py, Dispatch): the CPU
    features they may use, and named facts."""
    cpu_features: frozenset[str] = frozenset()
    # (framework, its kernel features, its facts as (name, value) pairs), for the frameworks known
    frameworks: frozenset[tuple[str, frozenset[str], frozenset[tuple[str, bool | str]]]] = frozenset()

    def kernel_features(self, framework: str) -> frozenset[str]:
        return next((k for name, k, _ in self.frameworks if name == framework), self.cpu_features)

    def facts(self, framework: str) -> dict:
        return next((dict(f) for name, _, f in self.frameworks if name == framework), {})

    @classmethod
    def of(cls, cpu_features, environments: dict[str, dict]) -> "Machine":
        """A CPU of ``cpu_features``, with the frameworks of ``environments`` (by framework: its
        environment, Framework.dispatch_environment)."""
        from poolgrad.adapters import registry  # the registry reads entry points: only when asked

        cpu_features, frameworks = frozenset(cpu_features), []
        for name, environment in environments.items():
            dispatch = registry.declared(name).dispatch
            frameworks.append((name, dispatch.kernel_features(cpu_features, environment),
                               frozenset(dispatch.machine_facts(environment).items())))
        return cls(cpu_features, frozenset(frameworks))

    @classmethod
    def from_environment(cls, env: dict) -> "Machine":
        """From a results environment record (what the run recorded of the machine)."""
        from poolgrad.adapters import registry

        return cls.of(env.get("cpu_features") or (),
                      {name: registry.declared(name).environment_in(env) for name in env.get("frameworks") or {}})


# -- loading ----------------------------------------------------------------------------
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


def _finding(raw: dict, index: int, base: Path = DATA) -> Finding:
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
        unknown_props = [a for p in props for a in p.lstrip("!").split("|") if a not in PROPERTIES]
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


def framework_packages() -> dict[str, Path]:
    """Every registered framework's package directory, by framework (its planner's: a
    framework's knowledge lives in its package, a plugin's included), then those of variants
    another package runs (Keras), by package, in registration order."""
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
    package (framework_packages), and the core's file where one is left."""
    files = [DEFAULT_PATH] if DEFAULT_PATH.exists() else []
    return files + [d / "findings.toml" for d in framework_packages().values() if (d / "findings.toml").exists()]


def history_files() -> list[Path]:
    """The lanes' history poolgrad reads by default: each framework package's ``history.json``."""
    return [d / "history.json" for d in framework_packages().values() if (d / "history.json").exists()]


def load(path: str | Path | None = None, history: str | Path | None = FRAMEWORK_HISTORIES, extra=()) -> "Knowledge":
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
        return [_finding(raw, i, path.parent) for i, raw in enumerate(data.get("finding", []))]
    except FindingsError as e:
        raise FindingsError(f"{path}: {e}") from None


# -- judging ----------------------------------------------------------------------------
@dataclasses.dataclass
class Judgement:
    outcome: str                     # pass | expected | behaviour_changed | fail | skipped
    explained_by: list[Finding]
    in_scope: list[Finding]
    contradicted: list[Finding]      # in scope, and their claim does not hold here

    @property
    def claim(self) -> str:
        return " + ".join(f"{f.id} ({f.claim_text()})" for f in self.in_scope)


SKIPPED_VERDICTS = ("unsupported", "not_installed", "no_device")


class Knowledge(list):
    """The findings, in file order, with those that can apply to a target looked up once."""

    def __init__(self, findings=(), history: dict | None = None):
        super().__init__(findings)
        self.history = history or {}
        self._by_target: dict = {}

    def for_target(self, framework, variant, device, version, machine: Machine) -> list[Finding]:
        key = (framework, variant, device, version, machine)
        if key not in self._by_target:
            self._by_target[key] = [g for f in self if f.in_target(framework, variant, device, version, machine)
                                    and (g := f.on_machine(machine)) is not None]
        return self._by_target[key]

    def for_mode(self, framework, variant, device, version, machine: Machine, mode: str) -> list[Finding]:
        """The findings of a target as claims on a record of ``mode`` (:meth:`Finding.in_mode`)."""
        key = (framework, variant, device, version, machine, mode)
        if key not in self._by_target:
            views = (f.in_mode(mode) for f in self.for_target(framework, variant, device, version, machine))
            self._by_target[key] = [f for f in views if f is not None]
        return self._by_target[key]

    def judge(self, candidates: list[Finding], op: str, dtype: str, properties, verdict: str,
              message: str, holds, call_elements: int = 0, call_properties=lambda: frozenset(),
              shows_no_more_than=lambda impact: True) -> Judgement:
        """The outcome of one result. ``candidates``: the findings of its target
        (:meth:`for_target`); ``holds(forward_policy, gradient_policy) -> bool``: whether the
        result equals the reference under those (partial) policies; ``call_elements``: the
        input elements of the framework call the case ran in; ``call_properties()``: the
        properties of all cases of that call; ``shows_no_more_than(impact)``: whether the
        result's arrays are no worse than ``impact`` says (a verdict claim checks nothing else,
        so a result off by more than rounding is never credited to a rounding finding)."""
        scope = [f for f in candidates if f.in_scope(op, dtype, properties, call_elements, call_properties)]
        if verdict in SKIPPED_VERDICTS and not any(f.verdict == verdict for f in scope):
            return Judgement("skipped", [], scope, [])
        if verdict == "reordered":
            # Sums in another order than the spec's: the findings that claim that order, bit for
            # bit (verdicts/sums.py), explain it; otherwise it passes as the spec's routing.
            explained = _credited([f for f in scope if f.claims_policy and "accumulate" in f.gradient],
                                  verdict, message, holds)
            if explained:
                return Judgement("expected", explained, scope, [])
        if verdict in ("conforms", "reordered"):
            # Canonical behaviour never fails, nor canonical routing whose sums another order
            # rounded; a finding that predicted otherwise is reported.
            return Judgement("pass", [], scope, [f for f in scope if not _claim_holds([f], verdict, message, holds)])
        explained = (_credited([f for f in scope if f.claims_policy], verdict, message, holds)
                     or _credited([f for f in scope if not f.claims_policy and shows_no_more_than(f.impact)],
                                  verdict, message, holds, compose=False))
        if explained:
            return Judgement("expected", explained, scope, [])
        if verdict in SKIPPED_VERDICTS:
            return Judgement("skipped", [], scope, [])
        return Judgement("behaviour_changed" if scope else "fail", [], scope, scope)


def _credited(findings: list[Finding], verdict: str, message: str, holds, compose: bool = True) -> list[Finding]:
    """The claims that take the credit for a result ([] where none explains it). Policy claims
    compose: the largest set whose claims hold together explains it (a smaller set where a wider
    finding's trigger changed nothing); a failure claim stands alone. Among the sets of that size
    that hold, the most specific wins, then the worst impact; never the order of the files."""
    for r in range(len(findings), 0, -1) if compose else (1,):
        holding = [list(c) for c in itertools.combinations(findings, r) if _claim_holds(list(c), verdict, message, holds)]
        if holding:
            return min(holding, key=_credit_order)
    return []


def _credit_order(findings: list[Finding]) -> tuple:
    """Most specific first, then worst impact (an unstated one ranks worst), then by id."""
    worst = max(IMPACT_RANK.get(f.impact, len(IMPACTS)) for f in findings)
    return -sum(f.specificity for f in findings), -worst, sorted(f.id for f in findings)


def _claim_holds(findings: list[Finding], verdict: str, message: str, holds) -> bool:
    if not all(f.claims_policy for f in findings):
        return all(f.matches_failure(verdict, message) for f in findings)
    if verdict not in ("conforms", "reordered", "policy", "inconsistent", "inconsistent_modes", "wrong"):
        return False
    forward, gradient = {}, {}
    for f in findings:
        forward.update(f.forward)
        gradient.update(f.gradient)
    return holds(forward, gradient)
