"""Suite-scale benchmark (issue 6): batching, compile counts, growth with cases and specs,
and peak memory, measured through the same GroupRunner and worker pool the suite uses.

    python benchmarks/bench_suite.py [--targets jax-jit-cpu,tensorflow-xla-cpu,torch-compile-cpu]
                                     [--op max_pool2d] [--dtype float32] [--json out.json]

For each target it runs the catalogue cases of one op and dtype (the base run), then the same
specs with 10x more cases per spec (new random inputs of the same shapes: same groups), then
10x more specs (kernel/stride variants: new groups). It prints wall time per run, records per
second, the ratio of each growth run to the base, and the framework's compile count against
the number of distinct (spec, dtype, shape) groups; the two must be equal.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from poolgrad.adapters.base import Target  # noqa: E402
from poolgrad.adapters.pool import ONE_THREAD_ENV, WorkerPool  # noqa: E402
from poolgrad.cases import catalogue, make_case  # noqa: E402
from poolgrad.reference import PoolSpec  # noqa: E402
from poolgrad.suite.runner import GroupRunner  # noqa: E402


def base_cases(op: str, dtype: str):
    return [c for c in catalogue() if c.id.startswith(op + "-") and c.spec.dtype == dtype
            and c.input.shape[0] > 0]


def more_cases(cases, factor: int):
    """Same specs and shapes, ``factor`` times as many cases (fresh random values)."""
    rng = np.random.default_rng(0)
    return [make_case(f"{c.id}-x{i}", c.family, c.spec, rng.standard_normal(c.input.shape))
            for c in cases for i in range(factor)]


def more_specs(cases, factor: int):
    """``factor`` times as many distinct specs: each case under other kernel/stride pairs."""
    out = []
    pairs = [(k, s) for k in (1, 2, 3) for s in (1, 2, 3, 4)][:factor]
    for c in cases:
        if c.spec.is_adaptive:
            continue
        for k, s in pairs:
            d = dict(c.spec.to_dict(), kernel_size=k, stride=s, padding=0, ceil_mode=False)
            d.pop("dilation", None)
            try:
                out.append(make_case(f"{c.id}-k{k}s{s}", c.family, PoolSpec.from_dict(d), c.input))
            except ValueError:
                continue  # kernel larger than this input
    return out


def run(pool, target, cases, timeout_s=600.0):
    runner = GroupRunner(pool, timeout_s=timeout_s)
    for c in cases:
        runner.register(c, target)
    before = pool.describe(target.framework)  # warm the worker outside the timing
    start = time.perf_counter()
    compiles = None
    for c in cases:
        outcome = runner.outcomes(c, target)[0]
        compiles = outcome.info.get("compiles", compiles)
    wall = time.perf_counter() - start
    groups = len({c.group_key for c in cases})
    return {"cases": len(cases), "groups": groups, "wall_s": round(wall, 3),
            "records_per_s": round(len(cases) / wall, 1), "compiles_total": compiles,
            "framework_version": before.get("version")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--targets", default="jax-jit-cpu,tensorflow-xla-cpu,torch-eager-cpu")
    p.add_argument("--op", default="max_pool2d")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--factor", type=int, default=10)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    cases = base_cases(args.op, args.dtype)
    report = {}
    pool = WorkerPool(env=ONE_THREAD_ENV)
    try:
        for tid in args.targets.split(","):
            fw, variant, device = tid.split("-")
            target = Target(fw, variant, device)
            base = run(pool, target, cases)
            grown = run(pool, target, more_cases(cases, args.factor))
            specs = run(pool, target, more_specs(cases, args.factor))
            # Compiles are cumulative per worker; the base run's groups are new, the 10x-cases
            # run reuses them, the 10x-specs run adds its own.
            report[tid] = {"base": base, "x_cases": grown, "x_specs": specs,
                           "x_cases_time_ratio": round(grown["wall_s"] / base["wall_s"], 2),
                           "x_specs_time_ratio": round(specs["wall_s"] / base["wall_s"], 2)}
            # A run's compiles are its increase of the cumulative count; the 10x-cases run stacks
            # ten times the planes per call, a new shape, so it compiles each group once again.
            counts = [r["compiles_total"] for r in (base, grown, specs)]
            new = [None if c is None else c - (p or 0) for c, p in zip(counts, [0, *counts[:2]])]
            for name, r, n in (("base", base, new[0]), ("10x cases per spec", grown, new[1]),
                               ("10x specs", specs, new[2])):
                ratio = round(r["wall_s"] / base["wall_s"], 2)
                print(f"{tid} {name}: {r['cases']} cases in {r['groups']} groups, {r['wall_s']} s "
                      f"({r['records_per_s']}/s, {ratio}x base), compiles {n} for {r['groups']} groups")
    finally:
        pool.close()
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report["peak_rss_mib"] = {"suite_process": round(peak_self, 1), "largest_worker": round(peak_children, 1)}
    print(f"peak RSS: suite process {peak_self:.0f} MiB, largest framework worker {peak_children:.0f} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
