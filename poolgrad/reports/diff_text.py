"""The release diff in words: every section (new divergences, fixed, fixed upstream, behaviour
changes, noise, label only), "none" when empty, as text for a terminal or Markdown for a release
note."""

from __future__ import annotations

from collections import defaultdict

from poolgrad.knowledge.impacts import IMPACT_RANK

from .diff import BEHAVIOUR, MARKDOWN, TEXT, Diff, Side, Style, impact_words, plural

# Results shown under each group: its first few (the JSON form lists all).
EXAMPLES = 3
# Whether the result passed, as its outcome (schema.OUTCOMES) says.
OUTCOME_WORDS = {"pass": "pass", "expected": "pass (known)", "behaviour_changed": "FAIL (finding contradicted)",
                 "fail": "FAIL", "skipped": "skipped"}

SECTIONS = (("new divergences", "new_divergences"), ("fixed", "fixed"), ("fixed upstream", "fixed_upstream"),
            ("behaviour changes", "behaviour_changes"),
            ("noise: nondeterministic by a finding, compared by whether it holds (not a change)", "nondeterministic"),
            ("label only: same behaviour, other labels (not a change)", "label_changes"))


def _finding_lines(d: Diff, ids, style: Style) -> list[str]:
    out = []
    for fid in dict.fromkeys(ids):  # each once, in order
        about = d.findings[fid]
        out.append(f"{style.code(fid)}, {impact_words(about['impact'])}: {style.text(about['title']) or '(no title)'}")
    return out


def _examples(changes: list, style: Style) -> list[str]:
    more = len(changes) - EXAMPLES
    return ([f"e.g. {c.line(style)}" for c in changes[:EXAMPLES]]
            + ([f"and {more} more (--json lists all)"] if more > 0 else []))


def _side(s: Side, style: Style) -> str:
    return f"{' + '.join(map(style.code, s.findings)) or s.label()}, {OUTCOME_WORDS.get(s.outcome, s.outcome)}"


def _entries(d: Diff, name: str, style: Style) -> tuple[str, list[tuple[str, list[str]]]]:
    """A section's count and its entries: (head line, detail lines) each."""
    def on(n, targets):
        return f"{plural(n, 'result')} on {', '.join(map(style.code, targets))}"
    if name == "fixed_upstream":
        return (plural(len(d.fixed_upstream), "finding"),
                [(f"{style.code(f.finding)}: {f.gone(style)}", _finding_lines(d, [f.finding], style))
                 for f in d.fixed_upstream])
    if name == "nondeterministic":
        by_finding = defaultdict(list)
        for r in d.nondeterministic:
            by_finding[tuple(r.findings)].append(r)
        entries = []
        for ids, races in sorted(by_finding.items()):
            held = sum(r.holds for r in races)
            shown = sorted(races, key=lambda r: r.holds)  # those no longer holding first
            entries.append((f"{on(len(races), sorted({r.target for r in races}))}: "
                            f"{' + '.join(map(style.code, ids))} still holds on {held}, no longer holds on "
                            f"{len(races) - held}",
                            _finding_lines(d, ids, style) + _examples(shown, style)))
        return plural(len(d.nondeterministic), "result"), entries
    groups = d.groups(name)
    return (f"{plural(len(getattr(d, name)), 'result')} in {plural(len(groups), 'group')}",
            [(f"{on(len(g.changes), g.targets)}: {_side(g.was, style)} {style.arrow} {_side(g.now, style)}",
              _finding_lines(d, g.was.findings + g.now.findings, style) + _examples(g.changes, style))
             for g in groups])


def _context(d: Diff) -> list[tuple[str, list[str]]]:
    """Versions, switches and coverage: printed where they changed."""
    return [(title, items) for title, items in (
        ("framework versions changed", d.version_changes), ("environment switches changed", d.environment_changes),
        ("targets added", d.targets_added), ("targets gone", d.targets_gone),
        ("poolgrad.cases", [f"{d.cases_added} added, {d.cases_gone} gone (on targets in both)"]
         if d.cases_added or d.cases_gone else [])) if items]


def _summary(d: Diff, style: Style) -> str:
    """The counts an auditor reads first: the changes, how many now fail, the worst impact now."""
    changes = [c for name in BEHAVIOUR for c in getattr(d, name)]
    failing = sum(c.now.outcome in ("fail", "behaviour_changed") for c in changes)
    now = {fid for c in changes for fid in c.now.findings if d.findings[fid]["impact"]}
    worst = max(now, key=lambda fid: (IMPACT_RANK[d.findings[fid]["impact"]], fid), default=None)
    return (f"{plural(len(d.new_divergences), 'new divergence')}, {len(d.fixed)} fixed, "
            f"{plural(len(d.behaviour_changes), 'behaviour change')}; {failing} of them failing now"
            + (f"; worst impact now: {d.findings[worst]['impact']} ({style.code(worst)})" if worst else ""))


def _verdict(d: Diff) -> str:
    if d.behaviour_changed:
        return f"yes (exit {d.exit_status})"
    noise = [what for what, items in (("nondeterministic results", d.nondeterministic), ("labels", d.label_changes))
             if items]
    return f"no (exit {d.exit_status})" + (f" — {' and '.join(noise)} only" if noise else "")


def format_text(d: Diff, base_name: str, new_name: str) -> str:
    lines = [f"poolgrad diff: {base_name} -> {new_name}", _summary(d, TEXT)]
    for title, items in _context(d):
        lines.append(f"{title} ({len(items)}):")
        lines.extend(f"  {item}" for item in items)
    for title, name in SECTIONS:
        count, entries = _entries(d, name, TEXT)
        lines.append(f"{title}: {count}" if entries else f"{title}: none")
        for head, details in entries:
            lines.append(f"  {head}")
            lines.extend(f"    {detail}" for detail in details)
    lines.append(f"behaviour changed: {_verdict(d)}")
    return "\n".join(lines)


def format_markdown(d: Diff, base_name: str, new_name: str) -> str:
    """The diff as a release note's section (CommonMark)."""
    lines = [f"## poolgrad release diff: `{base_name}` → `{new_name}`", "",
             f"**Behaviour changed: {_verdict(d)}**: {_summary(d, MARKDOWN)}", ""]
    for title, items in _context(d):
        lines.append(f"- {title[0].upper()}{title[1:]}: " + "; ".join(items))
    for title, name in SECTIONS:
        count, entries = _entries(d, name, MARKDOWN)
        lines += ["", f"### {title[0].upper()}{title[1:]}: {count if entries else 'none'}"]
        if entries:
            lines.append("")
        for head, details in entries:
            lines.append(f"- {head}")
            lines.extend(f"  - {detail}" for detail in details)
    return "\n".join(lines) + "\n"
