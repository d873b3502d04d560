"""The semantics pages, generated from the knowledge base and the release lanes' history.

Two kinds of reader, two kinds of page:

- ``docs/SEMANTICS.md``, for people who train models: one section per kind of case (ties, NaNs,
  infinities and padding, signed zeros, subnormals, low-precision sums, reductions and global
  layers, the rest), each a short paragraph in plain words and a narrow table (path, what it
  does, impact) whose cells link to the finding;
- ``docs/frameworks/<framework>.md``, for the people who maintain a framework: every finding
  under the stable anchor ``#<finding-id>`` with its claim, impact, behaviour, kernel source,
  the releases the lanes measured, its typed upstream references, its example case file and
  the command that reproduces it.

The HTML report carries the same pages (:func:`html_pages`).

    python -m poolgrad.reports.semantics --write     # writes docs/SEMANTICS.md and docs/frameworks/*.md
    python -m poolgrad.reports.semantics             # prints docs/SEMANTICS.md
    python -m poolgrad.reports.semantics -o FILE     # writes docs/SEMANTICS.md's text to FILE
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import importlib
import re
import shlex
import sys
from pathlib import Path

from poolgrad.adapters.registry import FRAMEWORKS

from poolgrad.knowledge import sources
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.finding import NO_UPSTREAM, Finding
from poolgrad.knowledge.history import status, version_key
from poolgrad.knowledge.impacts import IMPACTS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MAX_CELL = 300  # characters in a Markdown table cell: a page must read without scrolling sideways


@dataclasses.dataclass(frozen=True)
class Section:
    anchor: str
    title: str
    text: str                           # what the spec does and whether it matters, in plain words
    properties: tuple[str, ...] = ()    # case properties a finding requires to be in the section


# In reading order; a finding goes to the first section that takes it (:func:`section_of`).
SECTIONS = (
    Section("ties", "Ties", """Two or more elements of a window share the maximum. The spec sends the
window's gradient to the first of them in row-major window order (`argmax`). Any single maximum is a
valid subgradient, so a path that picks another one trains the same in expectation; only bit-exact
comparisons between frameworks see it. A path that gives the gradient to every maximum multiplies it.""",
            ("ties", "ties_if_flushed")),
    Section("nans", "NaNs", """A window holds a NaN. The spec propagates it: the output is NaN and the gradient
goes to the (first) NaN. Paths that skip NaN return a number and send the gradient elsewhere, so a NaN
in activations can vanish from the loss instead of surfacing. That matters when you rely on NaN to
find a bug; after the NaN has appeared, training is already off.""",
            ("nan", "nan_several", "nan_only", "nan_with_number", "nan_not_first", "number_then_nan")),
    Section("infinities", "Infinities and padding", """A window whose real elements are all -inf (masked
activations), a window that is mostly or only padding, an infinite maximum. The spec never lets padding
win and routes an all -inf window's gradient to its first element. Paths differ in what they seed a
window with (-inf, the lowest finite number, a padding tap), which decides whether the gradient is
routed, lost or written somewhere else. Masked pooling is where this bites.""",
            ("neginf_window", "neginf_window_at_padding", "neginf_window_after_padding", "no_finite_window",
             "no_finite_window_after_padding", "padding_could_win", "empty_window", "infinite_max", "padding",
             "ceil_overhang", "explicit_padding")),
    Section("signed-zeros", "Signed zeros", """-0.0 and +0.0 compare equal, so a window holding both is a
tie; the spec's forward returns the first and sends the gradient there. Paths that return the other zero
differ only in the sign of a zero: harmless for training, visible to bit-exact tests.""",
            ("signed_zero_tie",)),
    Section("subnormals", "Subnormals", """Numbers below the dtype's smallest normal (about 1e-38 in
float32). The spec compares them exactly. CPU paths that flush them to zero (FTZ/DAZ) turn tiny
distinct values into ties, so the gradient may go to another element of the window: a tie choice
among values that are zero for practical purposes.""",
            ("subnormal",)),
    Section("low-precision-sums", "Low-precision sums", """Where windows overlap, an element's gradient is
a sum; avg and lp pooling sum every window. The spec sums in float64 and rounds once. Paths that add in
float16, bfloat16 or float32, or in no fixed order (GPU atomics), differ in the last bits, more for
large sums, and can overflow to inf where the spec does not. Usually harmless; check it when you train
in float16 or need bitwise reproducibility.""",
            ("window_sum_overflows", "power_sum_overflows", "power_overflows")),
    Section("reductions", "Reductions and global layers", """Pooling written as a reduction (`amax`,
`reduce_max`, `mean` over the spatial axes), by reshape, over extracted patches, or as a global pooling
layer is adaptive pooling with output size 1, or a window that tiles the input. The spec is the same as
for the pooling functions, and the suite checks these paths against it.""",
            ("adaptive_unit_axis", "adaptive_unit_last_axis")),
    Section("other", "Other cases: dtypes, geometry, refused calls", """Behaviours tied to a dtype, a window
geometry (dilation, ceil_mode, lp_pool at zero) or an empty batch rather than to the values: a call
refused where the spec has a result, a crash, or a gradient that is wrong for that geometry."""),
)


def idiom_variants(framework: str) -> tuple[str, ...]:
    """The variants of ``framework`` that pool by a reduction, reshape, patches or a global layer
    (the ``IDIOMS`` of the planner that plans each variant)."""
    fw = FRAMEWORKS.get(framework)
    if fw is None:
        return ()
    planners = {v: fw.worker(v).planner for v in fw.variants}
    return tuple(v for v, planner in planners.items()
                 if planner and v in getattr(importlib.import_module(planner), "IDIOMS", ()))


def _required(f: Finding) -> set[str]:
    """The case properties the finding requires (of its case, or of its call)."""
    return {alt for r in (*f.when, *f.when_call) if not r.startswith("!") for alt in r.split("|")}


def section_of(f: Finding) -> Section:
    """Reductions first (by path), subnormals, low-precision sums (by claim), then by the case's
    values, then by the policy claimed."""
    by_anchor = {s.anchor: s for s in SECTIONS}
    required = _required(f)
    idioms = idiom_variants(f.framework)
    if (idioms and all(v in idioms for v in f.variants)) or required & set(by_anchor["reductions"].properties):
        return by_anchor["reductions"]
    if "subnormal" in required:
        return by_anchor["subnormals"]
    sums = ("accumulate" in f.forward or "accumulate" in f.gradient or f.verdict == "nondeterministic"
            or f.impact == "rounding")
    if sums or required & set(by_anchor["low-precision-sums"].properties):
        return by_anchor["low-precision-sums"]
    for anchor in ("signed-zeros", "nans", "infinities", "ties"):
        if required & set(by_anchor[anchor].properties):
            return by_anchor[anchor]
    # No case property decides: what the claimed policy is about does (an AD mode's claim).
    claimed = {*f.forward, *f.gradient}
    for keys, anchor in ((("signed_zero",), "signed-zeros"), (("nan", "nan_tie"), "nans"), (("ftz",), "subnormals"),
                         (("init", "padding"), "infinities"), (("tie", "order"), "ties")):
        if claimed & set(keys):
            return by_anchor[anchor]
    return by_anchor["other"]


# -- words for a finding ----------------------------------------------------------------
IMPACT_WORDS = {
    "valid_subgradient": "valid subgradient",
    "rounding": "rounding",
    "nan_semantics": "NaN/inf handling",
    "gradient_lost": "gradient lost",
    "gradient_misrouted": "gradient misrouted",
    "wrong_forward": "wrong forward",
    "error": "error",
    "crash": "crash",
}


def impact_text(f: Finding) -> str:
    return IMPACT_WORDS.get(f.impact, f.impact) if f.impact else "not rated yet"


def _expand(patterns: tuple[str, ...], names) -> list[str]:
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def variants_of(f: Finding) -> list[str]:
    fw = FRAMEWORKS.get(f.framework)
    return _expand(f.variants, fw.variants) if fw else list(f.variants)


def path_text(f: Finding) -> str:
    """Framework and variants, and the devices and dtypes where the finding is narrower."""
    fw = FRAMEWORKS.get(f.framework)
    variants = variants_of(f)
    named = "all paths" if fw and len(variants) == len(fw.variants) else ", ".join(variants)
    where = [", ".join(d.upper() for d in f.devices)] if f.devices != ("*",) else []
    where += [", ".join(f.dtypes)] if f.dtypes != ("*",) else []
    return f"{f.framework} {named}" + (f" ({'; '.join(where)})" if where else "")


def claim(f: Finding) -> str:
    """What the finding claims: the policies it follows (SPEC.md, "Policies") or the verdict, and
    the AD modes it is about."""
    modes = "" if f.modes == ("backward",) else f" (in {', '.join(f.modes)})"
    return f.claim_text() + modes


def scope_text(f: Finding) -> str:
    """The scope past :func:`path_text`: ops, machine, the cases' properties."""
    scope = [", ".join(f.ops)] if f.ops != ("*",) else []
    scope += [f"{k} {' '.join(v)}" for k, v in (("CPU", f.cpu_features), ("kernel features", f.kernel_features)) if v]
    scope += [f"{d} on CPU {' '.join(r)}" for d, r in f.dtype_cpu_features]
    scope += [fact_text(name, value) for name, value in f.machine_facts]
    if f.when or f.when_call:
        scope.append("cases: " + ", ".join((*f.when, *(f"call {w}" for w in f.when_call))))
    if f.min_call_elements:
        scope.append(f"calls of {f.min_call_elements}+ elements")
    return "; ".join(scope)


def fact_text(name: str, value) -> str:
    """A machine fact as people read it: ``name on`` (or ``off``) for true or false, else ``name value``."""
    return f"{name} {('on' if value else 'off') if isinstance(value, bool) else value}"


def releases(knowledge: Knowledge, f: Finding) -> str:
    """What each release lane measured of the finding (poolgrad/knowledge/history.py), and the range
    derived from it."""
    lanes = {lane["lane"]: lane for lane in knowledge.history.get("lanes", [])}
    seen: dict[str, list[str]] = {}
    for lane, counts in knowledge.history.get("findings", {}).get(f.id, {}).items():
        s = status(counts)
        if s != "not seen" and lane in lanes:
            label = lanes[lane]["version"] + lane.removeprefix(f"{f.framework}-{lanes[lane]['version']}").replace("-", " ")
            seen.setdefault(s, []).append(label)
    if not seen:
        return "not measured by a release lane"

    def ordered(labels):
        return sorted(labels, key=lambda v: (version_key(v.split()[0]), v))
    text = "; ".join(f"{s} on {', '.join(ordered(seen[s]))}" for s in ("holds", "partly", "does not hold") if s in seen)
    return text + (f" (range {f.versions})" if str(f.versions) else "")


def upstream_lines(f: Finding) -> list[str]:
    """The typed upstream references as Markdown list items; "no upstream report" without one."""
    lines = []
    for r in f.upstream:
        title = r.title or r.url
        kind = f"fix ({r.state})" if r.type == "fix" else r.type
        lines.append(f"{kind}: [{_escape(title)}]({r.url})" + (f": {r.note}" if r.note else ""))
    return lines or [NO_UPSTREAM]


def reported(f: Finding) -> bool:
    return any(r.type == "report" for r in f.upstream)


def example_path(f: Finding) -> str | None:
    """The example case file, relative to the repository root where it lies inside it."""
    if f.example is None:
        return None
    path = Path(f.example).resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def reproduce_command(f: Finding) -> str | None:
    """The run that shows the finding on its example: its first variant and device, failing
    where the finding explains a result (``--fail-on`` its impact), so the test names it."""
    if f.example is None:
        return None
    variant = (variants_of(f) or ["*"])[0]
    device = "cpu" if any(fnmatch.fnmatchcase("cpu", d) for d in f.devices) else "gpu"
    # by the finding's id (--example), so it runs wherever poolgrad is installed, not only in a checkout
    args = ["poolgrad", "--example", f.id, "--frameworks", f.framework, "--variants", variant, "--devices", device]
    if "backward" not in f.modes:
        args += ["--ad-modes", "all"]
    if f.impact in IMPACTS:  # a known behaviour passes; at its own impact it fails, named
        args += ["--fail-on", f.impact]
    return shlex.join(args)


def _escape(text: str) -> str:
    """Text safe inside a Markdown table cell or link text."""
    return text.replace("|", "\\|").replace("[", "\\[").replace("]", "\\]")


def _cell(text: str) -> str:
    text = _escape(" ".join(text.split()))
    return text if len(text) <= MAX_CELL else text[:MAX_CELL - 1] + "…"


def _anchor_link(f: Finding, from_docs: bool, text: str) -> str:
    page = f"frameworks/{f.framework}.md" if from_docs else f"{f.framework}.md"
    return f"[{_cell(text)}]({page}#{f.id})"


# -- the pages ----------------------------------------------------------------------------
GENERATED = ("Generated by `python -m poolgrad.reports.semantics --write` from the knowledge base (each "
             "framework's `findings.toml`) and the release lanes' history (each framework package's `history.json`).")


def semantics_page(knowledge: Knowledge) -> str:
    """docs/SEMANTICS.md: what each path does, by kind of case, for people who train models."""
    by_section: dict[str, list[Finding]] = {s.anchor: [] for s in SECTIONS}
    for f in knowledge:
        by_section[section_of(f).anchor].append(f)
    severity = list(IMPACTS)
    lines = ["# What pooling gradients do in each framework, and whether it matters", "", GENERATED, "",
             "SPEC.md says what max, avg and lp pooling and their gradients should compute. Where a framework "
             "path does something else, a finding says what, why (its kernel source) and how much it matters "
             "for training. Paths not listed in a section follow the spec there, as far as the suite's cases "
             "show. Each finding's full entry is on its framework's page: "
             + ", ".join(f"[{fw}](frameworks/{fw}.md)" for fw in frameworks_with_findings(knowledge)) + ".", "",
             "| Impact | What it means |", "| --- | --- |"]
    lines += [f"| {IMPACT_WORDS[i]} | {_cell(words)} |" for i, words in IMPACTS.items()]
    for s in SECTIONS:
        found = sorted(by_section[s.anchor], key=lambda f: (f.framework, -_rank(f, severity), f.id))
        lines += ["", f"## {s.title}", "", " ".join(s.text.split()), ""]
        if s.anchor == "reductions":
            paths = [f"{fw} {v}" for fw in sorted(FRAMEWORKS) for v in idiom_variants(fw)]
            if paths:
                lines += [f"Paths of this kind the suite runs: {', '.join(paths)}.", ""]
        if not found:
            lines.append("No finding: the paths the suite runs follow the spec here, as far as its cases show.")
            continue
        lines += ["| Path | What it does | Impact |", "| --- | --- | --- |"]
        lines += [f"| {_cell(path_text(f))} | {_anchor_link(f, True, f.title)} | {impact_text(f)} |" for f in found]
    return "\n".join(lines) + "\n"


def _rank(f: Finding, severity: list[str]) -> int:
    return severity.index(f.impact) if f.impact in severity else -1


def frameworks_with_findings(knowledge: Knowledge) -> list[str]:
    # sorted: the registry's order depends on how entry points were found
    return sorted({f.framework for f in knowledge})


def framework_page(knowledge: Knowledge, framework: str) -> str:
    """docs/frameworks/<framework>.md: every finding of the framework, for its maintainers."""
    found = sorted((f for f in knowledge if f.framework == framework), key=lambda f: f.id)
    lines = [f"# {framework}: where its pooling paths depart from the spec", "", GENERATED, "",
             f"{len(found)} findings, each under its id's anchor. SPEC.md defines the policies a claim names; "
             "`python -m poolgrad.upstream ID` drafts a report for a finding that has none.", "",
             "| Finding | Impact | Upstream |", "| --- | --- | --- |"]
    for f in found:
        state = "reported" if reported(f) else ("referenced" if upstream_lines(f) != [NO_UPSTREAM] else "none")
        lines.append(f"| [{f.id}](#{f.id}) | {impact_text(f)} | {state} |")
    for f in found:
        lines += ["", f"## {f.id}", "", f"**{f.title}**", "",
                  f"- Paths: {path_text(f)}" + (f"; {scope_text(f)}" if scope_text(f) else ""),
                  f"- Claim: {claim(f)}",
                  f"- Impact: {impact_text(f)}" + (f": {IMPACTS[f.impact]}" if f.impact in IMPACTS else ""),
                  f"- Behaviour: {f.behaviour}",
                  f"- Kernel source: {f.source}",
                  f"- Releases measured: {releases(knowledge, f)}" + (f"; upstream history: {f.since}" if f.since else "")]
        refs = upstream_lines(f)
        lines += [f"- Upstream: {refs[0]}"] if len(refs) == 1 else ["- Upstream:", *(f"  - {r}" for r in refs)]
        example = example_path(f)
        if example is not None:
            lines += [f"- Example: [{example}](../../{example})" if not Path(example).is_absolute() else f"- Example: {example}",
                      f"- Reproduce: `{reproduce_command(f)}`"]
        if not reported(f):
            lines.append(f"- Draft a report: `python -m poolgrad.upstream {f.id}`")
    return "\n".join(lines) + "\n"


def pages(knowledge: Knowledge) -> dict[str, str]:
    """Every page, by its path under docs/."""
    out = {"SEMANTICS.md": semantics_page(knowledge)}
    for fw in frameworks_with_findings(knowledge):
        out[f"frameworks/{fw}.md"] = framework_page(knowledge, fw)
    return out


def markdown(knowledge: Knowledge) -> str:
    """docs/SEMANTICS.md's text (what ``-o`` writes)."""
    return semantics_page(knowledge)


def write(knowledge: Knowledge, docs: Path = DOCS) -> list[Path]:
    """Write every page under ``docs``; a framework page of a framework with no finding left is
    removed."""
    written = []
    for name, text in pages(knowledge).items():
        path = docs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    for stale in (docs / "frameworks").glob("*.md"):
        if stale not in written:
            stale.unlink()
    return written


# -- the same pages in the HTML report -----------------------------------------------------
def html_pages(knowledge: Knowledge) -> list[dict]:
    """The pages as HTML fragments for the report: [{"id", "title", "html"}]. Raw HTML in the
    Markdown is not rendered (the knowledge is text); links between the pages become links to
    anchors in the one file, other links their text (:func:`_local_links`)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    out, ids = [], {f.id for f in knowledge}
    for name, text in pages(knowledge).items():
        page_id = "semantics" if name == "SEMANTICS.md" else f"framework-{Path(name).stem}"
        tokens = md.parse(text)
        title = ""
        for i, tok in enumerate(tokens):
            if tok.type == "heading_open":
                heading = tokens[i + 1].content
                if tok.tag == "h1":
                    title = heading
                    tok.attrSet("id", page_id)
                else:
                    tok.attrSet("id", heading if heading in ids else f"{page_id}-{_slug(heading)}")
            if tok.type == "inline" and tok.children:
                tok.children = _local_links(tok.children)
        out.append({"id": page_id, "title": title, "html": md.renderer.render(tokens, md.options, {})})
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _local_links(children: list) -> list:
    """Links to another page's anchor -> "#anchor"; any other link -> its text, and a web
    address after it (the report is one offline file: it links nowhere else)."""
    from markdown_it.token import Token

    out, closing = [], []
    for tok in children:
        if tok.type == "link_open":
            href = tok.attrGet("href") or ""
            if "#" in href and not href.startswith(("http://", "https://")):
                tok.attrSet("href", "#" + href.split("#", 1)[1])
                closing.append(None)
                out.append(tok)
            else:
                closing.append(href if href.startswith(("http://", "https://")) else "")
            continue
        if tok.type == "link_close" and closing:
            href = closing.pop()
            if href is None:
                out.append(tok)
            elif href:
                text = Token("text", "", 0)
                text.content = f" ({href})"
                out.append(text)
            continue
        out.append(tok)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m poolgrad.reports.semantics", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--write", action="store_true", help="write docs/SEMANTICS.md and docs/frameworks/<framework>.md")
    out.add_argument("-o", "--output", default="-", help="write docs/SEMANTICS.md's text to this file ('-': print it)")
    p.add_argument("--findings", action="append", default=[], metavar="PATH", help="a findings file of your own, added to the installed frameworks' knowledge base (repeatable)")
    args = p.parse_args(argv)
    knowledge = sources.load(extra=args.findings)
    if args.write:
        for path in write(knowledge):
            print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    elif args.output == "-":
        sys.stdout.write(markdown(knowledge))
    else:
        Path(args.output).write_text(markdown(knowledge))
    return 0


if __name__ == "__main__":
    sys.exit(main())
