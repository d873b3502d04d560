"""The semantics table: behaviours x framework paths, generated from the knowledge base.

Rows are kinds of case (numeric ties, several NaNs, a NaN beside numbers, -inf windows at
padding, signed zeros, subnormals, ...), named by the case properties the findings select on;
columns are framework paths (framework and variant); a cell names what the path does there,
the releases the lanes measured it on, and the finding with its upstream link. A blank cell
is the spec's canonical behaviour (SPEC.md) as far as the catalogue shows. Findings about the
AD modes (forward mode, double backward) name their modes in the cell.

    python -m poolgrad.cases.semantics            # print the Markdown table
    python -m poolgrad.cases.semantics -o docs/SEMANTICS.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from poolgrad.adapters.registry import FRAMEWORKS

from . import findings as kb
from .history import per_release, version_key

# Rows in reading order: (title, the case properties that put a finding in the row).
ROWS = (
    ("Signed zeros (-0.0 vs +0.0)", ("signed_zero_tie",)),
    ("Numeric ties", ("ties", "ties_if_flushed")),
    ("Several NaNs in a window", ("nan_several", "nan_only")),
    ("A NaN beside numbers", ("nan", "nan_with_number", "nan_not_first")),
    ("Infinities: all -inf windows, padding, infinite maxima",
     ("neginf_window", "neginf_window_at_padding", "neginf_window_after_padding", "no_finite_window",
      "padding_could_win", "empty_window", "infinite_max")),
    ("Subnormals", ("subnormal",)),
    ("ceil_mode overhang", ("ceil_overhang",)),
    ("lp_pool at zero", ("zero_window", "zero_power_sum")),
    ("Dilation", ("dilation",)),
    ("Explicit padding", ("explicit_padding",)),
    ("Empty input", ("empty",)),
)
OTHER = "Dtypes and kernels"


def row_of(f: kb.Finding) -> str:
    """The first row naming a property the finding requires (of its case, or of its call)."""
    required = {alt for r in (*f.when, *f.when_call) if not r.startswith("!") for alt in r.split("|")}
    return next((title for title, props in ROWS if required & set(props)), OTHER)


def columns() -> list[tuple[str, str]]:
    return [(fw.name, v) for fw in FRAMEWORKS.values() for v in fw.variants]


def releases(knowledge: kb.Knowledge, f: kb.Finding) -> str:
    seen = per_release(knowledge.history, f.id)
    held = sorted((v for v, s in seen.items() if s in ("holds", "partly")), key=version_key)
    if not held:
        return "not measured"
    text = held[0] if len(held) == 1 else f"{held[0]}–{held[-1]}"
    return text + (f" (range {f.versions})" if str(f.versions) else "")


def claim(f: kb.Finding) -> str:
    """What the finding claims; an AD-mode finding names its modes, whose policy its
    ``forward`` is (its ``gradient``: the reverse mode's of the same call)."""
    ad = "/".join(m for m in f.modes if m != "backward")
    if f.claims_policy:
        parts = []
        if f.forward == f.gradient:
            parts.append(_policy(f.forward))
        else:
            first = ad if "backward" not in f.modes else "forward"
            parts += [f"{first} {_policy(f.forward)}" if f.forward else "",
                      f"gradient {_policy(f.gradient)}" if f.gradient else ""]
        text = "; ".join(p for p in parts if p)
    else:
        text = f.verdict + (f" ({' / '.join(f.error[0])})" if f.error else "")
    if not ad:
        return text
    if "backward" in f.modes:
        return f"{text}, also in {ad.replace('/', ', ')}"
    return text if text.startswith(ad) else f"{ad}: {text}"


_SHORT = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64"}


def cell(f: kb.Finding) -> str:
    """A cell's text: the claim, and the dtypes or machine where the finding is narrower."""
    where = [" ".join(_SHORT.get(d, d) for d in f.dtypes)] if f.dtypes != ("*",) else []
    where += [f"{_SHORT.get(d, d)} with {' '.join(r)}" for d, r in f.dtype_cpu_features]
    where += [" ".join(r for r in f.onednn_isa)] if f.onednn_isa else []
    return claim(f) + (f" ({'; '.join(where)})" if where else "")


def _policy(p: dict) -> str:
    return ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in p.items()) or "canonical"


def scope_text(f: kb.Finding) -> str:
    scope = [" ".join(v) for v in (f.ops, f.dtypes, f.devices) if v != ("*",)]
    scope += [f"{k} {' '.join(v)}" for k, v in (("CPU", f.cpu_features), ("oneDNN ISA", f.onednn_isa)) if v]
    scope += [f"{d} on CPU {' '.join(r)}" for d, r in f.dtype_cpu_features]
    if f.min_call_elements:
        scope.append(f"calls of {f.min_call_elements}+ elements")
    if f.modes != ("backward",):
        scope.append(f"modes {' '.join(f.modes)}")
    return "; ".join(scope)


def table(knowledge: kb.Knowledge) -> list[tuple[str, list[list[int]]]]:
    """[(row title, per column of columns(): the numbers (1-based) of its findings)]."""
    number = {f.id: i for i, f in enumerate(knowledge, 1)}
    out = []
    for title in [t for t, _ in ROWS] + [OTHER]:
        in_row = [f for f in knowledge if row_of(f) == title]
        if in_row:
            out.append((title, [[number[f.id] for f in in_row if f.framework == fw and kb._any(v, f.variants)]
                                for fw, v in columns()]))
    return out


def markdown(knowledge: kb.Knowledge) -> str:
    findings = list(knowledge)
    lines = ["# What each framework path does: the semantics table", "",
             "Generated by `python -m poolgrad.cases.semantics -o docs/SEMANTICS.md` from the knowledge base",
             "(`poolgrad/cases/data/findings.toml`) and the release lanes' history (`poolgrad/cases/data/history.json`).",
             "Rows are kinds of case, columns framework paths; a cell names the policy the path follows",
             "there (SPEC.md, \"Policies\") or what it does instead, with the number of the finding below",
             "(what the kernel does, why, the releases measured, the upstream report). An empty cell: the",
             "path follows the spec on that kind of case, as far as the catalogue shows.", "",
             "| | " + " | ".join(f"{fw} {v}" for fw, v in columns()) + " |",
             "| --- |" + " --- |" * len(columns())]
    for title, cells in table(knowledge):
        row = ["<br>".join(f"{cell(findings[n - 1])} [{n}]" for n in numbers) for numbers in cells]
        lines.append(f"| **{title}** | " + " | ".join(row) + " |")
    lines += ["", "## Findings", ""]
    for n, f in enumerate(findings, 1):
        link = f.link if f.link == kb.NO_UPSTREAM else f"<{f.link}>"
        lines += [f"{n}. **{f.title}** (`{f.id}`; {f.framework} {', '.join(f.variants)}"
                  + (f"; {scope_text(f)}" if scope_text(f) else "") + ")",
                  f"   - {f.behaviour}",
                  f"   - Source: {f.source}",
                  f"   - Releases measured: {releases(knowledge, f)}" + (f"; since: {f.since}" if f.since else ""),
                  f"   - Upstream: {link}"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m poolgrad.cases.semantics", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", default="-")
    p.add_argument("--findings", action="append", default=[], metavar="PATH", help="a findings file of your own, added to the installed frameworks' knowledge base (repeatable)")
    args = p.parse_args(argv)
    text = markdown(kb.load(extra=args.findings))
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
