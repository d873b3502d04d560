"""Whole-catalogue benchmark (issues 6 and 12): wall time of the conformance run, sequential
and with ``-n 2``, cold and with warm compiler caches, records checked per second per target,
framework calls (batching groups) and inductor compilations, bytes per record of the results
file and of the JUnit XML, peak memory and, with ``--baseline REV``, the same runs of another
commit of poolgrad, all as ratios in one process. ``--scale N`` also runs N random draws of
every case (the same specs and calls, N times the cases, as case files; a case's draws are
checked in its test: poolgrad/cases/FORMAT.md, "Draws") and prints the cost of N times the
cases per spec as a ratio (without --baseline, the x1 case file is then the
catalogue's only run); ``--floor`` adds pytest's own cost for as many tests that do nothing,
in the same mode, and the least that ratio can be with as many test items as the runs had.

    python benchmarks/bench_catalogue.py [--modes n2,seq] [--caches cold,warm] [--baseline REV]
        [--variants eager,jit,...] [--frameworks torch,...] [-k EXPR] [--scale N [--floor]] [--json out.json]
    python benchmarks/bench_catalogue.py --caches warm --cache-dir ~/.cache/poolgrad --rounds 2 --baseline HEAD
    python benchmarks/bench_catalogue.py --what catalogue,test --modes n2 --caches cold --baseline 6d8d94d \
        --rounds 2 --frameworks tinygrad -k max_pool1d     # a fresh machine's first run, in minutes

Each run is ``pytest poolgrad/conformance --results R`` in a subprocess (the suite exactly as a
user runs it); ``--what test`` also runs the test command (``./run.sh test``'s pytest: the
project's tests and the catalogue, ``-n 2``). A baseline runs in a temporary ``git worktree`` of
REV with the same Python, its tree (and its plugins) first on PYTHONPATH, so the shared
virtualenv's editable install is left alone. Every (tree, what, mode, round) starts from empty
compiler caches ("cold", a fresh machine's first run): poolgrad's (--compile-cache's default,
$POOLGRAD_CACHE_DIR) and each framework's own default, pointed at fresh temporary directories by
environment variables, never deleted (:func:`cache_env`); "warm" reruns it with the caches the
cold run filled (a rerun on the same machine). ``--rounds N`` repeats the runs with the trees'
order alternating, keeping each run's fastest time (other load only adds time), and prints each
round's ratios. ``--caches warm --cache-dir DIR`` times only warm runs, every tree and
mode on the one already warm cache DIR (the generated kernels do not depend on poolgrad's
commit), and ``--rounds N`` repeats them with the trees alternating, keeping each run's
fastest wall time (other load only adds time). Records per second per target divide the target's records by the
summed ``duration_s`` of its checks (framework call share plus verdict), so they do not
depend on how many processes ran. Peak RSS is the largest single process of any run.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import importlib.metadata
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from poolgrad.reports.records import read_results  # noqa: E402  (the checkout's reader reads every writer's results)
MODES = {"seq": ["-p", "no:xdist"], "n2": ["-n", "2", "--dist", "loadgroup"]}


def cache_env(cache: Path, tree: Path) -> dict[str, str]:
    """This process's environment with every compiler cache a run can fill under ``cache``:
    poolgrad's, inductor's (by default /tmp/torchinductor_$USER) and Triton's (~/.triton), the
    XDG cache home (tinygrad's ~/.cache/tinygrad/cache.db, poolgrad's ~/.cache/poolgrad), CUDA's
    kernel cache; a JAX persistent cache the user set is dropped (JAX keeps none by default).
    TensorFlow's XLA keeps one only where poolgrad asks (under poolgrad's), MLX and Keras none.
    PYTHONPATH puts ``tree``'s poolgrad and plugins first: the editable install's finder comes
    after every path entry (:func:`tree_env`)."""
    env = {k: v for k, v in tree_env(tree, cache / "masked-plugins").items() if k != "JAX_COMPILATION_CACHE_DIR"}
    return {**env, "POOLGRAD_CACHE_DIR": str(cache), "XDG_CACHE_HOME": str(cache / "xdg"),
            "TORCHINDUCTOR_CACHE_DIR": str(cache / "torchinductor"), "TRITON_CACHE_DIR": str(cache / "triton"),
            "CACHEDB": str(cache / "xdg" / "tinygrad" / "cache.db"), "CUDA_CACHE_PATH": str(cache / "nv")}


def tree_env(tree: Path, masks: Path) -> dict[str, str]:
    """This process's environment with ``tree``'s poolgrad and plugins first on PYTHONPATH (the
    editable install's finder comes after every path entry) and the installed plugins ``tree``
    lacks masked (:func:`mask_plugins`, under ``masks``)."""
    plugins = sorted(str(p) for p in (tree / "plugins").glob("poolgrad-*") if p.is_dir())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "PYTHONPATH": os.pathsep.join([str(tree), *plugins, *mask_plugins(tree, masks)])}


def mask_plugins(tree: Path, where: Path) -> list[str]:
    """A directory whose metadata hides, from runs of ``tree``, the plugins installed in this
    Python that ``tree`` does not have (a commit from before them cannot import them, and the
    registry loads every ``poolgrad.adapters`` entry point): the first distribution of a name on
    sys.path is the one importlib.metadata reads, and this one declares no entry points."""
    own = {p.parent.name for p in (tree / "plugins").glob("poolgrad-*/*/__init__.py")}
    absent = {ep.dist.name for ep in importlib.metadata.entry_points(group="poolgrad.adapters")
              if ep.module.split(".")[0] not in own | {"poolgrad"}}
    for name in absent:
        info = where / f"{name.replace('-', '_')}-0.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0\n")
    return [str(where)] if absent else []


def run_suite(tree: Path, mode: str, selection: list[str], results: Path, cache: Path, what: str = "catalogue") -> dict:
    # Commits from before --compile-cache still get a private inductor cache (its default is
    # shared in /tmp), so cold means cold for them too.
    options = next(p for p in (tree / "poolgrad" / "suite" / "options.py", tree / "suite" / "options.py") if p.exists())
    knows_cache = "compile-cache" in options.read_text() and what == "catalogue"
    junit = results.with_suffix(".xml")
    # Commits whose writer compresses (records.open_results) write gzip, as the test command does.
    records_py = tree / "poolgrad" / "reports" / "records.py"
    if records_py.exists() and "def open_results" in records_py.read_text():
        results = results.with_suffix(".jsonl.gz")
    # Commits from before the installable package kept the plugin in a root conftest.py, which
    # the installed plugin (this Python's entry point) would register a second time.
    suite = ["poolgrad/conformance"] if (tree / "poolgrad" / "conformance").is_dir() else [
        "tests/conformance", "-p", "no:poolgrad"]
    # The test command collects its testpaths (the project's tests and the catalogue) itself.
    cmd = [sys.executable, "-m", "pytest", *(suite if what == "catalogue" else []), "-q", "-p", "no:cacheprovider",
           *MODES[mode], *selection, "--results", str(results), "--junitxml", str(junit),
           *(["--compile-cache", str(cache)] if knows_cache else [])]
    env = cache_env(cache, tree)
    fxgraphs = cache / "torchinductor" / "fxgraph"
    compiled_before = _entries(fxgraphs)
    start, used = time.perf_counter(), _children_cpu_s()
    proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    cpu = _children_cpu_s() - used
    per_target: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    calls: dict[str, set] = collections.defaultdict(set)
    outcomes: collections.Counter = collections.Counter()
    # Every writer's results, whole again (case records, deltas and all).
    for rec in read_results(results)[1] if results.exists() else []:
        per_target[rec["target"]][0] += 1
        per_target[rec["target"]][1] += rec.get("duration_s") or 0.0
        outcomes[rec["outcome"]] += 1
        if rec["outcome"] != "skipped":
            calls[rec["target"]].add((json.dumps(rec["spec"], sort_keys=True), tuple(rec["shape"][1:])))
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-300:]
    failed = [line for line in proc.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    records = sum(n for n, _ in per_target.values())
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "exit": proc.returncode, "pytest": summary, "records": records,
            # The checks' own seconds (framework call share plus verdict), by target and in all.
            "check_cpu_s": round(sum(s for _, s in per_target.values()), 1),
            "check_s_per_target": {t: round(s, 1) for t, (_, s) in sorted(per_target.items())},
            "outcomes": dict(outcomes), "failed": failed,
            "records_per_s": {t: round(n / s, 1) if s else None for t, (n, s) in sorted(per_target.items())},
            "calls_per_target": {t: len(c) for t, c in sorted(calls.items())},
            # What this run added to the cache: a warm run's cache hits add nothing.
            "inductor_compilations": _entries(fxgraphs) - compiled_before,
            "results_bytes": results.stat().st_size if results.exists() else 0,
            "results_plain_bytes": _plain_bytes(results),
            "results_bytes_per_record": round(results.stat().st_size / records) if records else None,
            "junit_bytes": junit.stat().st_size if junit.exists() else 0}


def _plain_bytes(results: Path) -> int:
    """The results file's size as plain JSON lines (decompressed where it is gzip)."""
    if not results.exists():
        return 0
    if results.suffix != ".gz":
        return results.stat().st_size
    with gzip.open(results, "rb") as fh:
        return sum(len(chunk) for chunk in iter(lambda: fh.read(1 << 20), b""))


def floor_run(mode: str, tests: int, where: Path) -> dict:
    """pytest's own cost (JUnit XML written, the checkout's plugin choices) for ``tests``
    tests that do nothing: what each (case, target) test costs before the suite does any work,
    so the least an N x run can cost. With pytest-xdist (n2) its default scheduling, the
    cheapest per test: its loadgroup takes each ungrouped test as a group, in time quadratic
    in the tests."""
    module = where / f"test_floor_{tests}.py"
    module.write_text(f"import pytest\n\n\n@pytest.mark.parametrize('i', range({tests}))\n"
                      "def test_nothing(i):\n    pass\n")
    how = ["-n", "2", "--dist", "load"] if mode == "n2" else MODES[mode]
    cmd = [sys.executable, "-m", "pytest", str(module), "-q", "-p", "no:cacheprovider", "-p", "no:poolgrad",
           "-p", "no:logging", *how, "--junitxml", str(where / f"floor-{tests}.xml")]
    start, used = time.perf_counter(), _children_cpu_s()
    proc = subprocess.run(cmd, cwd=where, capture_output=True, text=True)
    return {"tests": tests, "wall_s": round(time.perf_counter() - start, 1), "cpu_s": round(_children_cpu_s() - used, 1),
            "exit": proc.returncode}


def tests_run(summary: str) -> int:
    """The tests a pytest summary line counts ("25526 passed, 846 skipped, 10 warnings in 79.04s")."""
    return sum(int(n) for n, _ in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)\b", summary))


def _entries(fxgraphs: Path) -> int:
    return sum(1 for _ in fxgraphs.glob("*/*")) if fxgraphs.exists() else 0


def _children_cpu_s() -> float:
    """User + system seconds of every finished child process tree (pytest, its xdist processes,
    their framework workers): under other load, CPU time moves far less than wall time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def scaled_case_files(where: Path, scale: int) -> dict[str, Path]:
    """The catalogue as a case file, and N draws of each of its cases as another."""
    from poolgrad.cases.case_file import write_case_file
    from poolgrad.cases.catalogue import catalogue
    files = {}
    for label, draws in (("x1", 1), (f"x{scale}", scale)):
        files[label] = where / f"cases-{label}.json"
        write_case_file(catalogue(draws), files[label])
    return files


def run_name(label: str, what: str, mode: str, cache: str) -> str:
    """current/n2/cold (the catalogue), current/test/n2/cold (the test command)."""
    return "/".join([label, *([what] if what != "catalogue" else []), mode, cache])


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
    p.add_argument("--floor", action="store_true",
                   help="with --scale: also time pytest alone on as many no-op tests as each scaled run had "
                        "(the least N x the cases can cost with as many test items)")
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="one compiler cache for every run (with --caches warm: an already warm one)")
    p.add_argument("--rounds", type=int, default=1, metavar="N",
                   help="N rounds, the trees' order alternating (each cold run on empty caches of its own); "
                        "each run keeps its fastest wall and CPU time")
    p.add_argument("--what", default="catalogue",
                   help="comma list of: catalogue (pytest poolgrad/conformance), test (the test command: "
                        "pytest over the testpaths, tests/ and the catalogue)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if "cold" not in args.caches.split(",") and not args.cache_dir:
        p.error("--caches warm needs --cache-dir DIR (a warm compiler cache), or cold before it to fill one")
    if args.rounds > 1 and "cold" in args.caches.split(",") and args.cache_dir:
        p.error("--rounds N with cold runs needs an empty cache per run: leave out --cache-dir")
    whats = args.what.split(",")
    if set(whats) - {"catalogue", "test"}:
        p.error(f"--what: catalogue and/or test, got {args.what!r}")
    selection = [f"--{name}={value}" for name, value in (("variants", args.variants),
                                                          ("frameworks", args.frameworks)) if value]
    selection += ["-k", args.keyword] if args.keyword else []
    modes = args.modes.split(",")
    caches = args.caches.split(",")
    report: dict = {"selection": selection, "runs": {}}
    rounds: dict[str, list] = {}  # run name -> its runs, one a round
    with tempfile.TemporaryDirectory() as tmp:
        def cache_dir(name: str) -> Path:
            """The compiler caches of a (tree, what, mode, round): its own, empty before its cold run,
            or --cache-dir."""
            return Path(args.cache_dir).expanduser() if args.cache_dir else Path(tmp) / f"cache-{name}"
        trees = {"current": ROOT}
        if args.baseline:
            trees["baseline"] = worktree(args.baseline, Path(tmp))
        try:
            # With --scale the catalogue's own run is the x1 case file's: run once, not twice.
            for round_ in range(0 if args.scale and not args.baseline else args.rounds):
                # Alternating: neither tree always runs first (or on the machine the other warmed).
                for label, tree in list(trees.items())[::-1 if round_ % 2 else 1]:
                    for what in whats:
                        for mode in modes:
                            for cache in caches:
                                name = run_name(label, what, mode, cache)
                                r = run_suite(tree, mode, selection,
                                              Path(tmp) / f"{label}-{what}-{mode}-{cache}-{round_}.jsonl",
                                              cache_dir(f"{label}-{what}-{mode}-{round_}"), what)
                                rounds.setdefault(name, []).append(r)
                                print(f"{name} (round {round_ + 1}): {r['wall_s']} s wall, {r['cpu_s']} s CPU, "
                                      f"{r['records']} records, exit {r['exit']} ({r['pytest']})", flush=True)
                                for line in r["failed"][:10]:  # a slower tree that fails is no comparison
                                    print(f"  {line}", flush=True)
            for name, runs_of in rounds.items():
                report["runs"][name] = {**runs_of[-1], **{key: min(r[key] for r in runs_of)
                                                         for key in ("wall_s", "cpu_s")}}
            if args.scale:
                for label, path in scaled_case_files(Path(tmp), args.scale).items():
                    for cache in caches:
                        name = f"cases {label}/{modes[0]}/{cache}"
                        r = run_suite(ROOT, modes[0], [*selection, "--case-file", str(path)],
                                      Path(tmp) / f"scaled-{label}-{cache}.jsonl",
                                      cache_dir(f"scaled-{label}"))
                        report["runs"][name] = r
                        print(f"{name}: {r['wall_s']} s wall, {r['cpu_s']} s CPU, {r['records']} records, "
                              f"exit {r['exit']} ({r['pytest']})", flush=True)
                        if args.floor and cache == caches[0]:
                            floor = report["runs"][f"floor {label}/{modes[0]}"] = floor_run(
                                modes[0], tests_run(r["pytest"]), Path(tmp))
                            print(f"floor {label}/{modes[0]}: {floor['tests']} no-op tests, {floor['wall_s']} s wall, "
                                  f"{floor['cpu_s']} s CPU, exit {floor['exit']}", flush=True)
        finally:
            if args.baseline:
                subprocess.run(["git", "worktree", "remove", "--force", str(trees["baseline"])], cwd=ROOT,
                               capture_output=True)
    runs = report["runs"]
    wall = {name: r["wall_s"] for name, r in runs.items()}
    ratios = {}
    for label in trees if not (args.scale and not args.baseline) else ():
        for what in whats:
            for cache in caches:
                if "seq" in modes and "n2" in modes:
                    ratios[f"{label} {what} {cache}: n2 / seq"] = (
                        wall[run_name(label, what, "n2", cache)] / wall[run_name(label, what, "seq", cache)])
            for mode in modes if {"cold", "warm"} <= set(caches) else ():
                ratios[f"{label} {what} {mode}: warm / cold"] = (
                    wall[run_name(label, what, mode, "warm")] / wall[run_name(label, what, mode, "cold")])
    for what in whats if args.baseline else ():
        for mode in modes:
            for cache in caches:
                current, baseline = (rounds[run_name(label, what, mode, cache)] for label in ("current", "baseline"))
                for key, unit in (("wall_s", ""), ("cpu_s", ", CPU time"), ("check_cpu_s", ", summed duration_s")):
                    pairs = [(c[key], b[key]) for c, b in zip(current, baseline)]
                    if not min(b for _, b in pairs):
                        continue
                    ratios[f"{what} {mode} {cache}: current / baseline{unit}"] = (
                        min(c for c, _ in pairs) / min(b for _, b in pairs))
                    if len(pairs) > 1:  # each round's own ratio: how far load moved them
                        print(f"{what} {mode} {cache}: current / baseline{unit} by round: "
                              + ", ".join(f"{c / b:.3f}" if b else "-" for c, b in pairs))
    for cache in caches if args.scale else ():
        ratios[f"{args.scale}x cases per spec, {cache}: time / 1x"] = (
            wall[f"cases x{args.scale}/{modes[0]}/{cache}"] / wall[f"cases x1/{modes[0]}/{cache}"])
        ratios[f"{args.scale}x cases per spec, {cache}: CPU time / 1x"] = (
            runs[f"cases x{args.scale}/{modes[0]}/{cache}"]["cpu_s"] / runs[f"cases x1/{modes[0]}/{cache}"]["cpu_s"])
    for cache in caches if args.scale and args.floor else ():
        # Everything but pytest's own per-test cost free: the x1 run plus the no-op tests added.
        x1, floors = runs[f"cases x1/{modes[0]}/{cache}"], [runs[f"floor x{n}/{modes[0]}"] for n in (1, args.scale)]
        for key, what in (("wall_s", "time"), ("cpu_s", "CPU time")):
            ratios[f"{args.scale}x cases per spec, {cache}: least {what} / 1x (pytest's per-test cost only)"] = (
                (x1[key] + floors[1][key] - floors[0][key]) / x1[key])
    report["ratios"] = {k: round(v, 3) for k, v in ratios.items()}
    for name, value in report["ratios"].items():
        print(f"ratio {name}: {value:.3f}")
    for name, r in runs.items():
        if name.startswith("floor "):
            continue
        print(f"{name}: results {r['results_bytes'] / 1e6:.1f} MB ({r['results_bytes_per_record']} B/record; "
              f"{r['results_plain_bytes'] / 1e6:.1f} MB as plain JSON lines), "
              f"JUnit XML {r['junit_bytes'] / 1e6:.1f} MB, inductor compilations {r['inductor_compilations']}")
        for target, rate in r["records_per_s"].items():
            print(f"{name} {target}: {r['check_s_per_target'][target]} s of checks, {rate} records/s of check time, "
                  f"{r['calls_per_target'].get(target, 0)} framework calls (batching groups)")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    report["peak_rss_mib_largest_process"] = round(peak, 1)
    print(f"peak RSS, largest process of any run: {peak:.0f} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
