"""Scale of the reports: build the HTML report and the Markdown summary from N synthetic records
(default 100,000; a tenth of them divergences) and print the time and file sizes.

    python benchmarks/bench_report.py [N] [--json out/bench_report.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from poolgrad.reports import html, markdown, synthetic  # noqa: E402
from poolgrad.reports.records import read_results, write_record  # noqa: E402

TARGETS = [("torch", v) for v in ("eager", "channels_last", "compile", "module", "return_indices")] + \
          [("tensorflow", v) for v in ("eager", "function", "xla", "keras", "with_argmax")] + \
          [("jax", v) for v in ("eager", "jit")]


def records(n: int):
    """n result records over 12 targets; 1 in 10 follows tie=last (a divergence)."""
    spec, x, g = synthetic.tie_case()
    templates = {}
    for fw, variant in TARGETS:
        for tie in ("first", "last"):
            templates[fw, variant, tie] = synthetic.result("t", "ties", spec, x, g, framework=fw,
                                                           variant=variant, run_id="bench", tie=tie)
    yield synthetic.environment("bench")
    for i in range(n):
        fw, variant = TARGETS[i % len(TARGETS)]
        tie = "last" if i % 10 == 0 else "first"
        case = i // len(TARGETS)
        yield {**templates[fw, variant, tie], "case_id": f"max_pool2d-k2s1-ties-{case:06d}-float32",
               "family": f"family{case % 20}"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("n", type=int, nargs="?", default=100_000)
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results.jsonl"
        with open(results, "w") as fh:
            for rec in records(args.n):
                write_record(fh, rec)
        t0 = time.perf_counter()
        read_results(results)
        t_read = time.perf_counter() - t0
        t0 = time.perf_counter()
        report = html.write_html(results, Path(tmp) / "report.html")
        t_html = time.perf_counter() - t0
        t0 = time.perf_counter()
        markdown.write_markdown(results, Path(tmp) / "summary.md")
        t_md = time.perf_counter() - t0
        out = {"records": args.n, "divergences": len(report.divergences),
               "results_bytes": results.stat().st_size, "read_s": round(t_read, 2),
               "html_build_s": round(t_html, 2), "html_bytes": (Path(tmp) / "report.html").stat().st_size,
               "markdown_build_s": round(t_md, 2), "markdown_bytes": (Path(tmp) / "summary.md").stat().st_size}
    for k, v in out.items():
        print(f"{k:18s} {v}")
    print(f"html bytes per record: {out['html_bytes'] / args.n:.1f}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
