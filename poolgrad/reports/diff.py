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

An auditor reads changes by what explains them: each section groups its results by the findings
that explained them before and after (with the findings' titles and impacts, from the knowledge
base), the results' outcomes on each side and the targets they ran on; results no finding
explains are a group of their own ("unexplained"). Every section is printed, "none" when empty,
so nothing found reads apart from not checked (diff_text.py: ``format_text``, ``format_markdown``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import defaultdict
from collections.abc import Callable

from packaging.version import InvalidVersion

from poolgrad.knowledge import sources
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.history import version_key
from poolgrad.knowledge.impacts import IMPACT_RANK

from .records import encode_array, written_values
from .schema import NOT_RUN, RAN, case_label, is_divergence, mode_of

BEHAVIOUR = ("new_divergences", "fixed", "behaviour_changes")


@dataclasses.dataclass(frozen=True)
class Style:
    """How the text and Markdown forms write a name and an arrow."""
    code: Callable[[str], str]
    arrow: str
    text: Callable[[str], str]  # free text (a finding's title)


TEXT = Style(str, "->", str)
# A title is prose: a "<" must not open an HTML tag in the rendered note.
MARKDOWN = Style(lambda name: f"`{name}`", "→", lambda prose: prose.replace("<", "&lt;"))


@dataclasses.dataclass(frozen=True)
class Side:
    """How one run judged a result: the findings that explained it and its outcome."""
    findings: tuple[str, ...]
    outcome: str
    divergence: bool

    def label(self) -> str:
        return " + ".join(self.findings) or ("unexplained" if self.divergence else "conforms")


def side(rec: dict) -> Side:
    found = tuple(f["id"] for f in rec.get("findings") or ())
    if not found and rec.get("expected"):  # written before the knowledge base: its expectations entry
        found = (rec["expected"]["id"],)
    return Side(found, rec["outcome"], is_divergence(rec))


@dataclasses.dataclass
class Change:
    case_id: str
    target: str
    before: str
    after: str
    was: Side
    now: Side

    def line(self, style: Style = TEXT) -> str:
        return f"{style.code(self.case_id)} on {style.code(self.target)}: {self.before} {style.arrow} {self.after}"


@dataclasses.dataclass
class Group:
    """The changes of one section with the same explanation and outcome on each side."""
    was: Side
    now: Side
    changes: list[Change]

    @property
    def targets(self) -> list[str]:
        return sorted({c.target for c in self.changes})

    def to_dict(self) -> dict:
        return {"was": dataclasses.asdict(self.was), "now": dataclasses.asdict(self.now),
                "results": len(self.changes), "targets": self.targets}


@dataclasses.dataclass
class Racing:
    """A pair whose arrays differ where a nondeterministic finding is in play."""
    case_id: str
    target: str
    findings: list[str]
    holds: bool  # in the new results the finding still holds (the result is not judged a failure)

    def line(self, style: Style = TEXT) -> str:
        return f"{style.code(self.case_id)} on {style.code(self.target)}: {', '.join(map(style.code, self.findings))} " + (
            "still holds" if self.holds else "no longer holds")


@dataclasses.dataclass
class FixedUpstream:
    """A finding that held in the baseline, where the new results no longer show it."""
    finding: str
    title: str
    impact: str
    results: int
    targets: list[str]
    fixes: list[dict]  # its fix references: url, title, state

    def line(self) -> str:
        return f"{self.finding} ({impact_words(self.impact)}: {self.title}): {self.gone()}"

    def gone(self, style: Style = TEXT) -> str:
        fixes = "; ".join(f"fix {r['url']} ({r.get('state') or 'state not recorded'})" for r in self.fixes)
        return (f"gone from the {plural(self.results, 'result')} it explained on "
                f"{', '.join(map(style.code, self.targets))}; " + (fixes or "no fix reference in the knowledge base"))


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
    # every finding the changes name: id -> {"title", "impact"} (the knowledge base's, else the record's)
    findings: dict[str, dict] = dataclasses.field(default_factory=dict)

    @property
    def behaviour_changed(self) -> bool:
        return any(getattr(self, name) for name in BEHAVIOUR)

    @property
    def exit_status(self) -> int:
        return 1 if self.behaviour_changed else 0

    def groups(self, name: str) -> list[Group]:
        """The changes of section ``name`` (new_divergences, fixed, behaviour_changes,
        label_changes) grouped by their sides; the worst impact first, then the most results."""
        by_sides = defaultdict(list)
        for c in getattr(self, name):
            by_sides[c.was, c.now].append(c)
        return sorted((Group(was, now, changes) for (was, now), changes in by_sides.items()),
                      key=lambda g: (-self._worst(g.was.findings + g.now.findings), -len(g.changes),
                                     g.was.label(), g.now.label()))

    def _worst(self, ids) -> int:
        ranks = [IMPACT_RANK[self.findings[i]["impact"]] for i in ids if self.findings[i]["impact"]]
        return max(ranks, default=-1)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["behaviour_changed"] = self.behaviour_changed
        d["exit_status"] = self.exit_status
        d["groups"] = {name: [g.to_dict() for g in self.groups(name)] for name in (*BEHAVIOUR, "label_changes")}
        return d


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def impact_words(impact: str) -> str:
    return f"impact {impact}" if impact else "no impact stated"


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
    found = ", ".join(side(rec).findings)
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
            return "behaviour_changes", describe(a), ("the same, other arrays" if describe(a) == describe(b)
                                                      else describe(b))
    if _label(a) != _label(b):
        return "label_changes", _label(a), _label(b)
    return None


def _framework_versions(envs: list[dict], results: list[dict], tested: set[str]) -> dict[str, set]:
    """The versions of the frameworks ``tested`` (with results in either run): one merely
    installed beside them is not what the runs audit."""
    versions = defaultdict(set)
    for r in results:
        versions[r["framework"]].add(r["framework_version"])
    for e in envs:
        for name, fw in e["frameworks"].items():
            if fw.get("version") and name in tested:
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


def _fixed_upstream(pairs: list[tuple[dict, dict]], racing: set[str], knowledge, about) -> list[FixedUpstream]:
    """``about(fid)``: the finding's title and impact."""
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
        if fid in known:  # the knowledge base's references are newer than the baseline's record
            fixes = [{"url": r.url, "title": r.title, "state": r.state} for r in known[fid].upstream if r.type == "fix"]
        else:
            summary = next(f for f in held_pairs[0][0]["findings"] if f["id"] == fid)
            fixes = [r for r in summary.get("upstream") or () if r.get("type") == "fix"]
        out.append(FixedUpstream(fid, about(fid)["title"], about(fid)["impact"], len(held_pairs),
                                 sorted({b["target"] for _, b in held_pairs}), fixes))
    return out


def _about(knowledge, pairs: list[tuple[dict, dict]]):
    """A finding's title and impact by id: the knowledge base's, else (a finding it no longer
    has, or a file's own) what the records say of it."""
    known = {f.id: {"title": f.title, "impact": f.impact} for f in knowledge}
    said = {f["id"]: {"title": f.get("title", ""), "impact": f.get("impact") or ""}
            for pair in pairs for rec in pair for f in rec.get("findings") or ()}
    return lambda fid: known.get(fid) or said.get(fid) or {"title": "", "impact": ""}


def diff(base: tuple[list[dict], list[dict]], new: tuple[list[dict], list[dict]], knowledge=None) -> Diff:
    """``knowledge``: the findings (default: the installed knowledge base) that say which
    results are nondeterministic and what fixes a finding has."""
    (base_envs, base_results), (new_envs, new_results) = base, new
    knowledge = sources.load(history=None) if knowledge is None else Knowledge(knowledge)
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
            getattr(d, category).append(Change(case_label(new_rec), new_rec["target"], before, after,
                                               side(old), side(new_rec)))
    about = _about(knowledge, pairs)
    d.fixed_upstream = _fixed_upstream(pairs, racing, knowledge, about)
    named = {fid for name in (*BEHAVIOUR, "label_changes") for c in getattr(d, name) for fid in c.was.findings + c.now.findings}
    named |= {fid for r in d.nondeterministic for fid in r.findings} | {f.finding for f in d.fixed_upstream}
    d.findings = {fid: about(fid) for fid in sorted(named)}
    targets_a = {k[1:] for k in a}
    targets_b = {k[1:] for k in b}
    d.targets_added = sorted(" ".join(filter(None, t)) for t in targets_b - targets_a)
    d.targets_gone = sorted(" ".join(filter(None, t)) for t in targets_a - targets_b)
    common = targets_a & targets_b
    d.cases_added = sum(1 for k in set(b) - set(a) if k[1:] in common)
    d.cases_gone = sum(1 for k in set(a) - set(b) if k[1:] in common)
    tested = {r["framework"] for r in (*base_results, *new_results)}
    d.version_changes = _set_changes("", _framework_versions(base_envs, base_results, tested),
                                     _framework_versions(new_envs, new_results, tested))
    d.environment_changes = _set_changes("switch ", _switches(base_envs), _switches(new_envs))
    return d


# Every section an auditor reads, printed even when empty: (title, Diff attribute).
