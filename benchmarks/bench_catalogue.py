"""Whole-catalogue benchmark (issues 6 and 12): wall time of the conformance run, sequential
and with ``-n 2``, cold and with warm compiler caches, records checked per second per target,
framework calls (batching groups) and inductor compilations, bytes per record of the results
file and of the JUnit XML, peak memory and, with ``--baseline REV``, the same runs of another
commit of poolgrad, all as ratios in one process. ``--scale N`` also runs N random draws of
every case (the same specs and calls, N times the cases, as case files) and prints the cost of
N times the cases per spec as a ratio.

    python benchmarks/bench_catalogue.py [--modes n2,seq] [--caches cold,warm] [--baseline REV]
        [--variants eager,jit,...] [--frameworks torch,...] [-k EXPR] [--scale N] [--json out.json]

Each run is ``pytest poolgrad/conformance --results R`` in a subprocess (the suite exactly as a
user runs it); a baseline runs in a temporary ``git worktree`` of REV with the same Python.
Every (tree, mode) starts from an empty compiler cache directory ("cold": inductor's C++
builds, XLA compilations), and "warm" reruns it with the cache the cold run filled (a rerun
on the same machine). Records per second per target divide the target's records by the
summed ``duration_s`` of its checks (framework call share plus verdict), so they do not
depend on how many processes ran. Peak RSS is the largest single process of any run.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = {"seq": ["-p", "no:xdist"], "n2": ["-n", "2", "--dist", "loadgroup"]}


def run_suite(tree: Path, mode: str, selection: list[str], results: Path, cache: Path) -> dict:
    # Commits from before --compile-cache still get a private inductor cache (its default is
    # shared in /tmp), so cold means cold for them too.
    knows_cache = "compile-cache" in (tree / "suite" / "options.py").read_text()
    junit = results.with_suffix(".xml")
    cmd = [sys.executable, "-m", "pytest", "poolgrad/conformance", "-q", "-p", "no:cacheprovider",
           *MODES[mode], *selection, "--results", str(results), "--junitxml", str(junit),
           *(["--compile-cache", str(cache)] if knows_cache else [])]
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache / "torchinductor")}
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    per_target: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    calls: dict[str, set] = collections.defaultdict(set)
    outcomes: collections.Counter = collections.Counter()
    specs = {}
    for line in results.read_text().splitlines() if results.exists() else []:
        rec = json.loads(line)
        if rec.get("record") == "case" and "spec" in rec:
            specs[rec["case_id"]] = (json.dumps(rec["spec"], sort_keys=True), tuple(rec["shape"][1:]))
        if rec.get("record") == "result":
            per_target[rec["target"]][0] += 1
            per_target[rec["target"]][1] += rec.get("duration_s") or 0.0
            outcomes[rec["outcome"]] += 1
            if rec["outcome"] != "skipped":
                spec = rec.get("spec")
                calls[rec["target"]].add(specs.get(rec["case_id"]) if spec is None else
                                         (json.dumps(spec, sort_keys=True), tuple(rec["shape"][1:])))
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-300:]
    records = sum(n for n, _ in per_target.values())
    fxgraphs = cache / "torchinductor" / "fxgraph"
    return {"wall_s": round(wall, 1), "exit": proc.returncode, "pytest": summary, "records": records,
            "outcomes": dict(outcomes),
            "records_per_s": {t: round(n / s, 1) if s else None for t, (n, s) in sorted(per_target.items())},
            "calls_per_target": {t: len(c) for t, c in sorted(calls.items())},
            "inductor_compilations": sum(1 for _ in fxgraphs.glob("*/*")) if fxgraphs.exists() else 0,
            "results_bytes": results.stat().st_size if results.exists() else 0,
            "results_bytes_per_record": round(results.stat().st_size / records) if records else None,
            "junit_bytes": junit.stat().st_size if junit.exists() else 0}


def scaled_case_files(where: Path, scale: int) -> dict[str, Path]:
    """The catalogue as a case file, and N draws of each of its cases as another."""
    sys.path.insert(0, str(ROOT))
    from cases.case_file import write_case_file
    from cases.catalogue import catalogue
    files = {}
    for label, draws in (("x1", 1), (f"x{scale}", scale)):
        files[label] = where / f"cases-{label}.json"
        write_case_file(catalogue(draws), files[label])
    return files


def worktree(rev: str, where: Path) -> Path:
    path = where / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True,
                   capture_output=True)
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--modes", default="n2,seq", help="comma list of: " + ", ".join(MODES))
    p.add_argument("--caches", default="cold,warm", help="cold, or cold,warm (warm reruns with the cold run's caches)")
    p.add_argument("--baseline", default=None, metavar="REV", help="also run this commit, for ratios")
    p.add_argument("--variants", default=None)
    p.add_argument("--frameworks", default=None)
    p.add_argument("-k", dest="keyword", default=None)
    p.add_argument("--scale", type=int, default=0, metavar="N",
                   help="also run N draws of every case (as case files) against one draw: the cost of N x the cases per spec")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    selection = [f"--{name}={value}" for name, value in (("variants", args.variants),
                                                          ("frameworks", args.frameworks)) if value]
    selection += ["-k", args.keyword] if args.keyword else []
    modes = args.modes.split(",")
    caches = args.caches.split(",")
    report: dict = {"selection": selection, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"current": ROOT}
        if args.baseline:
            trees["baseline"] = worktree(args.baseline, Path(tmp))
        try:
            for label, tree in trees.items():
                for mode in modes:
                    for cache in caches:
                        name = f"{label}/{mode}/{cache}"
                        r = run_suite(tree, mode, selection, Path(tmp) / f"{label}-{mode}-{cache}.jsonl",
                                      Path(tmp) / f"cache-{label}-{mode}")
                        report["runs"][name] = r
                        print(f"{name}: {r['wall_s']} s wall, {r['records']} records, exit {r['exit']} "
                              f"({r['pytest']})", flush=True)
            if args.scale:
                for label, path in scaled_case_files(Path(tmp), args.scale).items():
                    for cache in caches:
                        name = f"cases {label}/{modes[0]}/{cache}"
                        r = run_suite(ROOT, modes[0], [*selection, "--case-file", str(path)],
                                      Path(tmp) / f"scaled-{label}-{cache}.jsonl", Path(tmp) / f"cache-scaled-{label}")
                        report["runs"][name] = r
                        print(f"{name}: {r['wall_s']} s wall, {r['records']} records, exit {r['exit']} "
                              f"({r['pytest']})", flush=True)
        finally:
            if args.baseline:
                subprocess.run(["git", "worktree", "remove", "--force", str(trees["baseline"])], cwd=ROOT,
                               capture_output=True)
    runs = report["runs"]
    wall = {name: r["wall_s"] for name, r in runs.items()}
    ratios = {}
    for label in trees:
        for cache in caches:
            if "seq" in modes and "n2" in modes:
                ratios[f"{label} {cache}: n2 / seq"] = wall[f"{label}/n2/{cache}"] / wall[f"{label}/seq/{cache}"]
        for mode in modes if "warm" in caches else ():
            ratios[f"{label} {mode}: warm / cold"] = wall[f"{label}/{mode}/warm"] / wall[f"{label}/{mode}/cold"]
    for mode in modes if args.baseline else ():
        for cache in caches:
            ratios[f"{mode} {cache}: current / baseline"] = wall[f"current/{mode}/{cache}"] / wall[f"baseline/{mode}/{cache}"]
    for cache in caches if args.scale else ():
        ratios[f"{args.scale}x cases per spec, {cache}: time / 1x"] = (
            wall[f"cases x{args.scale}/{modes[0]}/{cache}"] / wall[f"cases x1/{modes[0]}/{cache}"])
    report["ratios"] = {k: round(v, 3) for k, v in ratios.items()}
    for name, value in report["ratios"].items():
        print(f"ratio {name}: {value:.3f}")
    for name, r in runs.items():
        print(f"{name}: results {r['results_bytes'] / 1e6:.1f} MB ({r['results_bytes_per_record']} B/record), "
              f"JUnit XML {r['junit_bytes'] / 1e6:.1f} MB, inductor compilations {r['inductor_compilations']}")
        for target, rate in r["records_per_s"].items():
            print(f"{name} {target}: {rate} records/s of check time, "
                  f"{r['calls_per_target'].get(target, 0)} framework calls (batching groups)")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    report["peak_rss_mib_largest_process"] = round(peak, 1)
    print(f"peak RSS, largest process of any run: {peak:.0f} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
