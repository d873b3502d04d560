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
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict

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
class Diff:
    new_divergences: list[Change] = dataclasses.field(default_factory=list)
    fixed: list[Change] = dataclasses.field(default_factory=list)
    behaviour_changes: list[Change] = dataclasses.field(default_factory=list)
    label_changes: list[Change] = dataclasses.field(default_factory=list)
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
    arrays write every NaN as "nan", so payloads do not count), else its verdict."""
    if rec["verdict"] in RAN:
        return json.dumps([rec.get("forward"), rec.get("grad_input"), rec.get("derivative"), rec.get("grad_grad_input")],
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


def _classify(a: dict, b: dict) -> tuple[str, str, str] | None:
    """(category, before, after) for a changed pair, or None when nothing changed."""
    same = behaviour(a) == behaviour(b)
    not_run = a["verdict"] in NOT_RUN or b["verdict"] in NOT_RUN
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


def diff(base: tuple[list[dict], list[dict]], new: tuple[list[dict], list[dict]]) -> Diff:
    (base_envs, base_results), (new_envs, new_results) = base, new
    versioned = _versioned(base_results) | _versioned(new_results)
    a, b = _index(base_results, versioned), _index(new_results, versioned)
    d = Diff()
    for key in sorted(set(a) & set(b)):
        found = _classify(a[key], b[key])
        if found:
            category, before, after = found
            getattr(d, category).append(Change(key[0], b[key]["target"], before, after))
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
    for title, items in sections:
        if items:
            lines.append(f"{title} ({len(items)}):")
            lines.extend(f"  {item}" for item in items)
    if d.label_changes:
        shown = d.label_changes[:LABELS_SHOWN]
        lines.append(f"label changes, same behaviour ({len(d.label_changes)}, not a change"
                     + (f"; first {len(shown)}, --json lists all" if len(shown) < len(d.label_changes) else "") + "):")
        lines.extend(f"  {c.line()}" for c in shown)
    if d.cases_added or d.cases_gone:
        lines.append(f"poolgrad.cases: {d.cases_added} added, {d.cases_gone} gone (on targets in both)")
    lines.append("behaviour changed: " + ("yes (exit 1)" if d.behaviour_changed else
                                          "no (exit 0)" + (" — labels only" if d.label_changes else "")))
    return "\n".join(lines)
