"""python -m poolgrad.reports: build, merge and diff poolgrad results (JSON-lines, poolgrad-results/1)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from poolgrad.knowledge import sources
from poolgrad.knowledge.schema import FindingsError

from . import diff as diff_mod
from . import diff_text
from . import html, markdown
from .merge import merge, write_merged
from .records import read_results
from .schema import RecordError

_DIFF_DESCRIPTION = """\
Compare two results sets record by record (matched by case and target). Every section is
printed, "none" when empty: new divergences; fixed; fixed upstream (findings the new results no
longer show, with their fixes); behaviour changes (a divergence whose arrays or failure moved);
noise (results a nondeterministic finding covers, compared by whether it still holds, not bit for
bit); label only (same behaviour, other verdict, policy or findings). A section groups its results
by the findings that explained them before and after, with their titles and impacts, the targets
and whether each side passed; results no finding explains are a group of their own
("unexplained"). Framework versions, switches and targets added or gone are listed where they
changed.
"""

# diff's exit status, in both help texts: a release lane's CI step branches on it.
_DIFF_EXIT = """\
Exit status of diff: 0 when no behaviour changed (versions, switches, coverage, label-only and
nondeterministic results alone exit 0); 1 when a result is a new divergence, fixed, or a divergence
whose arrays or failure moved; 2 when a results or findings file cannot be read or the command line
is wrong.
"""

_EPILOG = f"""\
Results files are what `pytest --results PATH` writes: one environment record per pytest
process and one result record per (case, target). Examples:

  # a report from one run, plus a Markdown summary for a CI page
  python -m poolgrad.reports build out/results.jsonl -o out/report.html --markdown out/summary.md

  # four CI shards and a GPU box become one file, then one report
  python -m poolgrad.reports merge shard-*.jsonl gpu.jsonl -o merged.jsonl
  python -m poolgrad.reports build merged.jsonl -o report.html

  # release audit: what changed since the last release's results, grouped by the findings
  # that explain it; --markdown writes it as a release note's section
  python -m poolgrad.reports diff results-2.12.jsonl results-2.13.jsonl
  python -m poolgrad.reports diff results-2.12.jsonl results-2.13.jsonl --markdown > release-note.md

{_DIFF_EXIT}
build and merge exit 0, or 2 when a file cannot be read. The format is documented in
poolgrad/reports/FORMAT.md.
"""


def _build(args) -> int:
    report = html.write_html(args.results, args.output, baseline=args.baseline)
    h = report.headline
    print(f"{args.output}: {h['unexplained']} unexplained failures in {h['total']} results; "
          f"{h['findings']} known behaviours hit")
    if args.markdown:
        Path(args.markdown).write_text(markdown.render(report), encoding="utf-8")
        print(f"{args.markdown}: Markdown summary")
    return 0


def _merge(args) -> int:
    merged = merge(*read_results(args.results), keep_timing=args.keep_timing)
    write_merged(merged, args.output)
    print(f"{args.output}: {len(merged.environments)} environments, {len(merged.results)} results "
          f"({merged.duplicates} duplicates dropped, {merged.conflicts} conflicting duplicates resolved, "
          f"{merged.orphans} results without an environment)")
    return 0


def _diff(args) -> int:
    d = diff_mod.diff(read_results(args.baseline), read_results(args.new), sources.load(history=None, extra=args.findings))
    if args.format == "json":
        print(json.dumps(d.to_dict(), indent=2, sort_keys=True))
    else:
        form = diff_text.format_markdown if args.format == "markdown" else diff_text.format_text
        print(form(d, args.baseline, args.new), end="\n" if args.format == "text" else "")
    return d.exit_status


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m poolgrad.reports", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG,
        description="Turn poolgrad results into reports, join results from several machines or shards, "
                    "and compare two runs.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    b = sub.add_parser("build", help="write the self-contained HTML report (and a Markdown summary)",
                       description="Write one self-contained HTML file (no network; opens from disk) with the "
                                   "environment, the op x family matrix per target, policy fingerprints and a "
                                   "drill-down with a reproducer script for every divergence. Several results "
                                   "files are merged first, as `merge` does.")
    b.add_argument("results", nargs="+", metavar="RESULTS", help="results files (JSON lines)")
    b.add_argument("-o", "--output", required=True, metavar="HTML", help="where to write the report")
    b.add_argument("--markdown", metavar="MD", help="also write a Markdown summary (matrix and divergences) here")
    b.add_argument("--baseline", nargs="+", metavar="OLD", help="results of an earlier run: the report gains a "
                                                                "'changes against the baseline' section")
    b.set_defaults(run=_build)

    m = sub.add_parser("merge", help="join results from shards, machines and framework versions into one file",
                       description="Join results files into one canonical file: the processes of one environment "
                                   "(shards of a run, or the unsharded run) become one lane, identical records "
                                   "collapse, and records are sorted by framework, version, variant, device and "
                                   "case, so merging the shards of a run gives the same bytes as merging the "
                                   "unsharded run.")
    m.add_argument("results", nargs="+", metavar="RESULTS", help="results files (JSON lines)")
    m.add_argument("-o", "--output", required=True, metavar="MERGED", help="where to write the merged JSON lines")
    m.add_argument("--keep-timing", action="store_true",
                   help="keep each record's duration_s (off by default: timing differs between runs of the same thing)")
    m.set_defaults(run=_merge)

    d = sub.add_parser("diff", help="what changed between a baseline and a new run (exit 1 if behaviour changed)",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_DIFF_EXIT,
                       description=_DIFF_DESCRIPTION)
    d.add_argument("baseline", metavar="BASELINE", help="results of the earlier run")
    d.add_argument("new", metavar="NEW", help="results of the run to audit")
    form = d.add_mutually_exclusive_group()
    form.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                      help="text (default), Markdown for a release note, or JSON with every change")
    form.add_argument("--markdown", dest="format", action="store_const", const="markdown",
                      help="the same as --format markdown")
    form.add_argument("--json", dest="format", action="store_const", const="json", help="the same as --format json")
    d.add_argument("--findings", action="append", default=[], metavar="PATH",
                   help="a findings file of your own, added to the installed knowledge base (repeatable): its "
                        "nondeterministic findings and fix references count as the installed ones do")
    d.set_defaults(run=_diff)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except (RecordError, OSError, FindingsError) as e:
        print(f"python -m poolgrad.reports {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
