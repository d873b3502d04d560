"""A finding in words for the semantics pages: its path, claim, scope, impact, the releases the
lanes measured, its upstream references, its example and the command that reproduces it."""

from __future__ import annotations

import fnmatch
import shlex
from pathlib import Path

from poolgrad.adapters.registry import FRAMEWORKS
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.finding import NO_UPSTREAM, Finding
from poolgrad.knowledge.history import status, version_key
from poolgrad.knowledge.impacts import IMPACTS

ROOT = Path(__file__).resolve().parents[2]
MAX_CELL = 300  # characters in a Markdown table cell: a page must read without scrolling sideways

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
    if f.verdict == "undefined":  # a run makes no such call unless asked
        args += ["--run-undefined"]
    if f.impact in IMPACTS:  # a known behaviour passes; at its own impact it fails, named
        args += ["--fail-on", f.impact]
    return shlex.join(args)


def _escape(text: str) -> str:
    """Text safe inside a Markdown table cell or link text."""
    return text.replace("|", "\\|").replace("[", "\\[").replace("]", "\\]")


def cell(text: str) -> str:
    text = _escape(" ".join(text.split()))
    return text if len(text) <= MAX_CELL else text[:MAX_CELL - 1] + "…"


def anchor_link(f: Finding, from_docs: bool, text: str) -> str:
    page = f"frameworks/{f.framework}.md" if from_docs else f"{f.framework}.md"
    return f"[{cell(text)}]({page}#{f.id})"
