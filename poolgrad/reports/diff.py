"""What changed between two results sets: the release audit between a baseline and a new run.

Records are matched by (case, target). Where one side holds a target at several framework
versions (a version matrix), that target's records are matched by (case, target, version).
A pair is compared by **behaviour**, never by label: the framework's forward and gradient
arrays (NaN payloads aside) for a result that ran, the verdict for one that did not (error,
crash, timeout). Each matched pair whose behaviour changed lands in one category: new
divergence, fixed, behaviour change (a divergence whose arrays or failure moved). Pairs with the
same behaviour and other labels (verdict, policy, outcome, findings: e.g. another release of
the knowledge base, or a result one side could not run) are listed as label changes; they never
make ``behaviour_changed`` true. Coverage (targets, cases) and environment (versions, switches)
changes are reported but are not behaviour.

Results that a finding calls nondeterministic (verdict "nondeterministic": GPU atomic adds,
memory a kernel never writes) differ from run to run on one release, so their arrays are no
evidence of a change: a pair of such results that both ran and whose arrays differ is compared
by whether the finding still holds, listed apart, and never makes ``behaviour_changed`` true.
A finding that explained results of the baseline whose new results (of the same framework release
or a newer one) no longer show it (they conform where it claimed a divergence, or contradict it)
is listed as fixed upstream, with the fix references the knowledge base gives it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import defaultdict

from packaging.version import InvalidVersion

from poolgrad.cases import findings as kb
from poolgrad.cases.history import version_key

from .records import encode_array, written_values
from .schema import NOT_RUN, RAN, case_label, is_divergence, mode_of

BEHAVIOUR = ("new_divergences", "fixed", "behaviour_changes")
LABELS_SHOWN = 20


@dataclasses.dataclass
class Change:
    case_id: str
    target: str
    before: str
    after: str

    def line(self) -> str:
        return f"{self.case_id} on {self.target}: {self.before} -> {self.after}"


@dataclasses.dataclass
class Racing:
    """A pair whose arrays differ where a nondeterministic finding is in play."""
    case_id: str
    target: str
    findings: list[str]
    holds: bool  # in the new results the finding still holds (the result is not judged a failure)

    def line(self) -> str:
        return f"{self.case_id} on {self.target}: {', '.join(self.findings)} " + (
            "still holds" if self.holds else "no longer holds")


@dataclasses.dataclass
class FixedUpstream:
    """A finding that held in the baseline, where the new results no longer show it."""
    finding: str
    title: str
    results: int
    targets: list[str]
    fixes: list[dict]  # its fix references: url, title, state

    def line(self) -> str:
        fixes = "; ".join(f"fix {r['url']} ({r.get('state') or 'state not recorded'})" for r in self.fixes)
        return (f"{self.finding}: gone from the {_count(self.results, 'result')} it explained on {', '.join(self.targets)}; "
                + (fixes or "no fix reference in the knowledge base"))


@dataclasses.dataclass
class Diff:
    new_divergences: list[Change] = dataclasses.field(default_factory=list)
    fixed: list[Change] = dataclasses.field(default_factory=list)
    behaviour_changes: list[Change] = dataclasses.field(default_factory=list)
    label_changes: list[Change] = dataclasses.field(default_factory=list)
    nondeterministic: list[Racing] = dataclasses.field(default_factory=list)
    fixed_upstream: list[FixedUpstream] = dataclasses.field(default_factory=list)
    targets_added: list[str] = dataclasses.field(default_factory=list)
    targets_gone: list[str] = dataclasses.field(default_factory=list)
    cases_added: int = 0
    cases_gone: int = 0
    version_changes: list[str] = dataclasses.field(default_factory=list)
    environment_changes: list[str] = dataclasses.field(default_factory=list)

    @property
    def behaviour_changed(self) -> bool:
        return any(getattr(self, name) for name in BEHAVIOUR)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["behaviour_changed"] = self.behaviour_changed
        return d


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def describe(rec: dict) -> str:
    """A verdict with its policies, as people read it: ``policy (tie=last, nan=propagate)``."""
    text = rec["verdict"]
    if rec.get("policy"):
        text += f" ({policy_text(rec['policy'])})"
    if rec.get("forward_policy") and rec["forward_policy"] != rec.get("policy"):
        # In an AD mode the policy is the mode's and forward_policy the reverse mode's.
        other = "forward" if mode_of(rec) == "backward" else "reverse mode"
        text += f" {other} ({policy_text(rec['forward_policy'])})"
    return text


def policy_text(policy: dict | None) -> str:
    return "-" if not policy else ", ".join(f"{k}={v}" for k, v in sorted(policy.items()))


def behaviour(rec: dict) -> str:
    """What the framework did, as a comparable key: its arrays when it ran the case (encoded
    arrays write every NaN as "nan", so payloads do not count), else its verdict. Arrays are
    compared by the values they stand for, so writers that spelled a value differently agree."""
    if rec["verdict"] in RAN:
        arrays = (rec.get(f) for f in ("forward", "grad_input", "derivative", "grad_grad_input"))
        return json.dumps([None if a is None else encode_array(written_values(a, rec["dtype"])) for a in arrays],
                          separators=(",", ":"))
    return rec["verdict"]


def _label(rec: dict) -> str:
    found = ", ".join(f["id"] for f in rec.get("findings") or ()) or (rec.get("expected") or {}).get("id")
    return f"{describe(rec)}, {rec['outcome']}" + (f" ({found})" if found else "")


def _versioned(results: list[dict]) -> set[str]:
    versions = defaultdict(set)
    for r in results:
        versions[r["target"]].add(r["framework_version"])
    return {t for t, v in versions.items() if len(v) > 1}


def _index(results: list[dict], versioned: set[str]) -> dict[tuple, dict]:
    return {(case_label(r), r["target"], r["framework_version"] if r["target"] in versioned else ""): r
            for r in results}


def _ids(rec: dict) -> set[str]:
    """The findings a record names: those that explain it and those it contradicts."""
    return {f["id"] for f in rec.get("findings") or ()} | set(rec.get("contradicts") or ())


def _race_holds(rec: dict) -> bool:
    """A race may land anywhere, the spec's result included: a result that ran holds to it
    unless it diverges where nothing explains it (the findings it names may be an older
    knowledge base's, which called the race "wrong" and a conforming result a contradiction)."""
    return not is_divergence(rec) or rec["outcome"] == "expected"


def _classify(a: dict, b: dict, in_play) -> tuple[str, str, str] | None:
    """(category, before, after) for a changed pair, or None when nothing changed.
    ``in_play()``: the nondeterministic findings in play."""
    same = behaviour(a) == behaviour(b)
    not_run = a["verdict"] in NOT_RUN or b["verdict"] in NOT_RUN
    if not same and a["verdict"] in RAN and b["verdict"] in RAN and in_play():
        return "nondeterministic", "", ""
    if not same and not not_run:
        if is_divergence(a) != is_divergence(b):
            return ("new_divergences" if is_divergence(b) else "fixed"), describe(a), describe(b)
        if is_divergence(a):  # two conforming results of an arithmetic op may round apart
            return "behaviour_changes", describe(a), describe(b)
    if _label(a) != _label(b):
        return "label_changes", _label(a), _label(b)
    return None


def _framework_versions(envs: list[dict], results: list[dict]) -> dict[str, set]:
    versions = defaultdict(set)
    for r in results:
        versions[r["framework"]].add(r["framework_version"])
    for e in envs:
        for name, fw in e["frameworks"].items():
            if fw.get("version"):
                versions[name].add(fw["version"])
    return versions


def _switches(envs: list[dict]) -> dict[str, set]:
    seen = defaultdict(set)
    for e in envs:
        for k, v in e["env_switches"].items():
            seen[k].add(str(v))
    return seen


def _set_changes(label: str, before: dict[str, set], after: dict[str, set]) -> list[str]:
    def show(values):
        return ", ".join(sorted(values)) or "(none)"
    return [f"{label}{name}: {show(before.get(name, ()))} -> {show(after.get(name, ()))}"
            for name in sorted(set(before) | set(after)) if before.get(name, set()) != after.get(name, set())]


def _gone(fid: str, a: dict, b: dict, racing: bool) -> bool:
    """The new result no longer shows the finding that explained the baseline's: it behaves
    otherwise and conforms (a nondeterministic finding's race may land on the spec: there only
    a contradiction counts) or contradicts the finding."""
    if behaviour(a) == behaviour(b) or fid in {f["id"] for f in b.get("findings") or ()}:
        return False
    return fid in (b.get("contradicts") or ()) or (not racing and not is_divergence(b))


def _older(b: dict, a: dict) -> bool:
    """``b`` ran an older release of the framework than ``a``."""
    try:
        return version_key(b["framework_version"]) < version_key(a["framework_version"])
    except InvalidVersion:
        return False


def _fixed_upstream(pairs: list[tuple[dict, dict]], racing: set[str], knowledge) -> list[FixedUpstream]:
    held = defaultdict(list)  # finding id -> the pairs whose baseline it explained
    for a, b in pairs:
        # A release older than the baseline's without the behaviour predates it: no fix.
        if b["verdict"] not in NOT_RUN and not _older(b, a):
            for f in a.get("findings") or ():
                held[f["id"]].append((a, b))
    known = {f.id: f for f in knowledge}
    out = []
    for fid, held_pairs in sorted(held.items()):
        if not all(_gone(fid, a, b, fid in racing) for a, b in held_pairs):
            continue
        summary = next(f for f in held_pairs[0][0]["findings"] if f["id"] == fid)
        if fid in known:  # the knowledge base's references are newer than the baseline's record
            fixes = [{"url": r.url, "title": r.title, "state": r.state} for r in known[fid].upstream if r.type == "fix"]
        else:
            fixes = [r for r in summary.get("upstream") or () if r.get("type") == "fix"]
        out.append(FixedUpstream(fid, summary.get("title", ""), len(held_pairs),
                                 sorted({b["target"] for _, b in held_pairs}), fixes))
    return out


def diff(base: tuple[list[dict], list[dict]], new: tuple[list[dict], list[dict]], knowledge=None) -> Diff:
    """``knowledge``: the findings (default: the installed knowledge base) that say which
    results are nondeterministic and what fixes a finding has."""
    (base_envs, base_results), (new_envs, new_results) = base, new
    knowledge = kb.load(history=None) if knowledge is None else kb.Knowledge(knowledge)
    racing = {f.id for f in knowledge if f.verdict == "nondeterministic"}
    versioned = _versioned(base_results) | _versioned(new_results)
    a, b = _index(base_results, versioned), _index(new_results, versioned)
    d = Diff()
    pairs = [(a[key], b[key]) for key in sorted(set(a) & set(b))]
    for old, new_rec in pairs:
        # Asked only of a pair whose arrays moved, once.
        in_play = functools.cache(lambda old=old, new_rec=new_rec: (
            _ids(old) | _ids(new_rec) | set(old.get("races") or ()) | set(new_rec.get("races") or ())) & racing)
        found = _classify(old, new_rec, in_play)
        if found is None:
            continue
        category, before, after = found
        if category == "nondeterministic":
            d.nondeterministic.append(Racing(case_label(new_rec), new_rec["target"], sorted(in_play()),
                                             _race_holds(new_rec)))
        else:
            getattr(d, category).append(Change(case_label(new_rec), new_rec["target"], before, after))
    d.fixed_upstream = _fixed_upstream(pairs, racing, knowledge)
    targets_a = {k[1:] for k in a}
    targets_b = {k[1:] for k in b}
    d.targets_added = sorted(" ".join(filter(None, t)) for t in targets_b - targets_a)
    d.targets_gone = sorted(" ".join(filter(None, t)) for t in targets_a - targets_b)
    common = targets_a & targets_b
    d.cases_added = sum(1 for k in set(b) - set(a) if k[1:] in common)
    d.cases_gone = sum(1 for k in set(a) - set(b) if k[1:] in common)
    d.version_changes = _set_changes("", _framework_versions(base_envs, base_results),
                                     _framework_versions(new_envs, new_results))
    d.environment_changes = _set_changes("switch ", _switches(base_envs), _switches(new_envs))
    return d


def format_text(d: Diff, base_name: str, new_name: str) -> str:
    lines = [f"poolgrad diff: {base_name} -> {new_name}"]
    sections = [("framework versions changed", d.version_changes),
                ("environment switches changed", d.environment_changes)]
    sections += [(name.replace("_", " "), [c.line() for c in getattr(d, name)]) for name in BEHAVIOUR]
    sections += [("targets added", d.targets_added), ("targets gone", d.targets_gone)]
    sections += [("fixed upstream", [f.line() for f in d.fixed_upstream])]
    for title, items in sections:
        if items:
            lines.append(f"{title} ({len(items)}):")
            lines.extend(f"  {item}" for item in items)
    if d.nondeterministic:
        held = sum(r.holds for r in d.nondeterministic)
        shown = sorted(d.nondeterministic, key=lambda r: r.holds)[:LABELS_SHOWN]  # those no longer holding first
        lines.append(f"nondeterministic by a finding: {_count(len(d.nondeterministic), 'result')}, finding still holds on "
                     f"{held}, no longer holds on {len(d.nondeterministic) - held} (compared by the finding, "
                     "not bit for bit; not a change" + (f"; first {len(shown)}, --json lists all"
                                                        if len(shown) < len(d.nondeterministic) else "") + "):")
        lines.extend(f"  {r.line()}" for r in shown)
    if d.label_changes:
        shown = d.label_changes[:LABELS_SHOWN]
        lines.append(f"label changes, same behaviour ({len(d.label_changes)}, not a change"
                     + (f"; first {len(shown)}, --json lists all" if len(shown) < len(d.label_changes) else "") + "):")
        lines.extend(f"  {c.line()}" for c in shown)
    if d.cases_added or d.cases_gone:
        lines.append(f"poolgrad.cases: {d.cases_added} added, {d.cases_gone} gone (on targets in both)")
    noise = [name for name, items in (("nondeterministic results", d.nondeterministic), ("labels", d.label_changes))
             if items]
    lines.append("behaviour changed: " + ("yes (exit 1)" if d.behaviour_changed else
                                          "no (exit 0)" + (f" — {' and '.join(noise)} only" if noise else "")))
    return "\n".join(lines)
