"""The verdict work of a run without the frameworks (issue 12): every record of a results file
judged again as the run judges it (suite.check: verdict, policy search, findings, record), in
this checkout and, with ``--baseline REV``, in a temporary ``git worktree`` of REV; the CPU
seconds of each, their ratio, and whether both reached the same conclusions on every record.

    python benchmarks/bench_verdicts.py RESULTS.jsonl [--baseline REV] [--rounds 3] [--json out.json]

A results file of a subset (``pytest poolgrad/conformance -k ... --results R``) is enough; the
cases are rebuilt once each and shared by their targets, as in a run. CPU time, not wall time:
it holds steady while other work shares the machine; each tree keeps its fastest round.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What a judged record concludes, in every record format: compared between trees.
CONCLUSIONS = ("verdict", "policy", "forward_policy", "valid_subgradient", "max_abs_error", "max_ulp_error",
               "differing_cells", "expected_forward", "expected_grad_input", "expected_derivative")


def judge(results: str) -> dict:
    """In the tree that is the working directory: judge every record, timed."""
    sys.path.insert(0, os.getcwd())
    # Trees from before the packages moved under poolgrad/ import them at the top level.
    package = "poolgrad." if os.path.isdir(os.path.join("poolgrad", "suite")) else ""

    def module(name):
        return importlib.import_module(package + name)
    Target = module("adapters.base").Target
    # Trees from before the knowledge layer (poolgrad/knowledge/) kept it in cases/findings.py.
    layer = os.path.isdir(os.path.join("poolgrad", "knowledge"))
    sources = module("knowledge.sources" if layer else "cases.findings")
    Machine = module("knowledge.machine" if layer else "cases.findings").Machine
    read_results = module("reports.records").read_results
    mode_of = module("reports.schema").mode_of
    check = module("suite.check").check
    case_of, outcome_of = module("suite.replay").case_of, module("suite.replay").outcome_of

    environments, records = read_results(results)
    knowledge = sources.load()
    machine = Machine.from_environment(environments[0])
    cases, items = {}, []
    for rec in records:
        if rec["case_id"] not in cases:
            cases[rec["case_id"]] = case_of(rec)
        items.append((rec, cases[rec["case_id"]], outcome_of(rec, cases[rec["case_id"]])))
    digest = hashlib.sha256()
    start = time.process_time()
    for rec, case, outcome in items:
        checked = check(case, Target(rec["framework"], rec["variant"], rec["device"]), rec["framework_version"],
                        [outcome], knowledge, 0.0, machine, mode=mode_of(rec))
        concluded = [checked.outcome, checked.message, [f.id for f in checked.judgement.explained_by],
                     *(checked.record.get(k) for k in CONCLUSIONS)]
        digest.update(json.dumps(concluded, sort_keys=True, default=str).encode())
    return {"records": len(items), "cpu_s": round(time.process_time() - start, 3), "digest": digest.hexdigest()}


def run_tree(tree: Path, results: Path, masks: Path) -> dict:
    """Judge in ``tree`` with its own plugins (bench_catalogue.tree_env: a commit from before a
    plugin's current planner cannot import it). Imported here, in the parent only: bench_catalogue
    imports this checkout's poolgrad, which the child judging another tree must not."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_catalogue import tree_env
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--judge", str(results)], cwd=tree,
                          capture_output=True, text=True, env=tree_env(tree, masks))
    if proc.returncode:
        raise SystemExit(f"judging in {tree} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="?", help="a results file (JSON lines) of the conformance suite")
    p.add_argument("--baseline", default=None, metavar="REV", help="also judge with this commit, for ratios")
    p.add_argument("--rounds", type=int, default=3, metavar="N", help="rounds per tree (trees alternating)")
    p.add_argument("--judge", default=None, help=argparse.SUPPRESS)  # the child: judge in the working directory
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.judge:
        print(json.dumps(judge(args.judge)))
        return 0
    if not args.results:
        p.error("give a results file (pytest poolgrad/conformance ... --results R)")
    results = Path(args.results).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"current": ROOT}
        if args.baseline:
            trees["baseline"] = Path(tmp) / "baseline"
            subprocess.run(["git", "worktree", "add", "--detach", str(trees["baseline"]), args.baseline],
                           cwd=ROOT, check=True, capture_output=True)
        try:
            runs: dict[str, dict] = {}
            for _ in range(args.rounds):
                for label, tree in trees.items():
                    r = run_tree(tree, results, Path(tmp) / f"masked-{label}")
                    if label in runs:
                        r["cpu_s"] = min(r["cpu_s"], runs[label]["cpu_s"])
                    runs[label] = r
        finally:
            if args.baseline:
                subprocess.run(["git", "worktree", "remove", "--force", str(trees["baseline"])], cwd=ROOT,
                               capture_output=True)
    for label, r in runs.items():
        print(f"{label}: {r['records']} records judged in {r['cpu_s']} s CPU "
              f"({1000 * r['cpu_s'] / max(r['records'], 1):.2f} ms/record), conclusions {r['digest'][:16]}")
    report = {"results": str(results), "runs": runs}
    if args.baseline:
        report["ratio"] = round(runs["current"]["cpu_s"] / runs["baseline"]["cpu_s"], 3)
        report["same_conclusions"] = runs["current"]["digest"] == runs["baseline"]["digest"]
        print(f"ratio current / baseline, CPU time: {report['ratio']:.3f}")
        print("same conclusions on every record" if report["same_conclusions"] else
              "CONCLUSIONS DIFFER: some record is judged otherwise (or the record format changed)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
