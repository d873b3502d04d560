"""Worker start-up time per framework and per-call overhead of the worker pipe.

    python benchmarks/bench_worker.py [--calls 50] [--json out.json]

Start-up is spawn plus importing the framework's adapter (what a test process pays once per
framework). Overhead is a small max_pool2d case run through the warm worker minus the same
call made in-process on a locally imported adapter. Worker rows are measured with the
inherited environment ("default") and with pool.ONE_THREAD_ENV ("one-thread"). Frameworks whose
adapter module is missing or not installed are reported as skipped.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from poolgrad.adapters import registry  # noqa: E402
from poolgrad.adapters.base import OK, Target  # noqa: E402
from poolgrad.adapters.pool import ONE_THREAD_ENV, WorkerPool  # noqa: E402
from poolgrad.reference import PoolSpec  # noqa: E402

SPEC = PoolSpec.from_dict({"op": "max_pool2d", "kernel_size": 2})
FAKE = registry.Framework("fake", "poolgrad.adapters.fake_adapter", "numpy", ("numpy",), ("eager",))


def _median_s(fn, calls: int) -> float:
    fn()  # warm: the first call may compile
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def measure(pool: WorkerPool, name: str, calls: int, in_process: bool) -> dict:
    fw = registry.FRAMEWORKS[name]
    if not registry.installed(name) or importlib.util.find_spec(fw.module) is None:
        return {"skipped": "not installed or no adapter module"}
    desc = pool.describe(name)
    if desc["status"] != OK:
        return {"skipped": desc["message"]}
    x = np.random.default_rng(0).standard_normal((1, 2, 8, 8)).astype(np.float32)
    g = np.ones((1, 2, 4, 4), np.float32)
    target = Target(name, fw.variants[0], "cpu")
    via_worker = _median_s(lambda: pool.run_group(target, SPEC, [x], [g], 60.0), calls)
    row = {"startup_s": desc["startup_s"], "call_ms": 1e3 * via_worker}
    if in_process:  # this process has the default environment, so compare with that worker
        adapter = importlib.import_module(fw.module).ADAPTER
        local = _median_s(lambda: adapter.run(SPEC, target.variant, "cpu", x, g), calls)
        row.update(in_process_ms=1e3 * local, overhead_ms=1e3 * (via_worker - local))
    began = time.perf_counter()
    pool.workers()[name].stop()
    row["shutdown_s"] = time.perf_counter() - began
    return row


def _line(label: str, row: dict) -> str:
    if "skipped" in row:
        return f"{label:22s} skipped: {row['skipped']}"
    line = f"{label:22s} start-up {row['startup_s']:6.2f} s  call {row['call_ms']:7.2f} ms"
    if "in_process_ms" in row:
        line += f"  in-process {row['in_process_ms']:7.2f} ms  pipe overhead {row['overhead_ms']:6.2f} ms"
    return line + f"  shutdown {row['shutdown_s']:5.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--json", help="also write the numbers here")
    args = parser.parse_args()
    registry.FRAMEWORKS["fake"] = FAKE  # this script's own process only: the pipe-only baseline
    results = {}
    for env_name, env in (("default", None), ("one-thread", ONE_THREAD_ENV)):
        pool = WorkerPool(env=env)
        for name in ("fake", "torch", "tensorflow", "jax"):
            row = results[f"{name}/{env_name}"] = measure(pool, name, args.calls, in_process=env is None)
            print(_line(f"{name} ({env_name})", row), flush=True)
        pool.close()
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
