"""Speed of the reference's max_pool 2-D backward against a per-window Python loop (the
seeds' algorithm) and against PyTorch's CPU kernel pinned to one thread, in one process.

    python benchmarks/bench_reference.py [--json out.json] [--repeat 7]

PyTorch is timed as forward with autograd plus backward, because the reference's backward
also has to find each window's maximum. The loop is timed on a leading slice of the batch
when the whole would be slow, and scaled by the batch ratio (the output says so).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from poolgrad.reference import PoolSpec, backward  # noqa: E402

SHAPES = [((128, 3, 28, 28), 2, 2), ((32, 16, 64, 64), 3, 2)]
LOOP_BUDGET_WINDOWS = 100_000   # enough to time the loop steadily; more only costs minutes


def loop_backward(x, g, k, s):
    """The seeds' answer: every window's argmax gets the window's upstream gradient
    (accumulated in float64 like the reference, so the two agree bit for bit)."""
    dx = np.zeros(x.shape)
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            for i in range(g.shape[2]):
                for j in range(g.shape[3]):
                    region = x[n, c, i * s:i * s + k, j * s:j * s + k]
                    a, b = np.unravel_index(np.argmax(region), region.shape)
                    dx[n, c, i * s + a, j * s + b] += g[n, c, i, j]
    return dx.astype(x.dtype)


def best_time(fn, repeat):
    """Fastest of ``repeat`` runs after one warm-up: the least disturbed by a busy machine."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def torch_timer(x, g, k, s, repeat):
    try:
        import torch
    except ImportError:
        return None, None
    torch.set_num_threads(1)
    xt, gt = torch.from_numpy(x), torch.from_numpy(g)

    def run():
        leaf = xt.detach().requires_grad_(True)
        torch.nn.functional.max_pool2d(leaf, k, s).backward(gt)
        return leaf.grad
    return best_time(run, repeat), run().numpy()


def bench(shape, k, s, repeat, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": k, "stride": s})
    out = (shape[2] - k) // s + 1
    g = rng.standard_normal(shape[:2] + (out, out)).astype(np.float32)
    t_ref = best_time(lambda: backward(spec, x, g), repeat)
    ref = backward(spec, x, g)

    per_item = shape[1] * out * out
    n_loop = max(1, min(shape[0], LOOP_BUDGET_WINDOWS // per_item))
    t = time.perf_counter()
    loop = loop_backward(x[:n_loop], g[:n_loop], k, s)
    t_loop = (time.perf_counter() - t) * shape[0] / n_loop
    assert np.array_equal(loop, ref[:n_loop]), "reference and loop disagree (random input: no ties)"

    t_torch, torch_dx = torch_timer(x, g, k, s, repeat)
    if torch_dx is not None:
        # torch accumulates overlapping windows in float32, the reference in float64
        np.testing.assert_allclose(torch_dx, ref, rtol=1e-6, atol=1e-6, err_msg="reference and torch disagree")
    return {
        "shape": list(shape), "kernel": k, "stride": s, "dtype": "float32",
        "reference_s": t_ref, "loop_s": t_loop, "loop_items_timed": n_loop,
        "loop_scaled": n_loop < shape[0], "torch_1thread_s": t_torch,
        "loop_over_reference": t_loop / t_ref,
        "reference_over_torch": None if t_torch is None else t_ref / t_torch,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for shape, k, s in SHAPES:
        r = bench(shape, k, s, args.repeat, rng)
        rows.append(r)
        scaled = f" (loop timed on {r['loop_items_timed']} of {shape[0]} items, scaled)" if r["loop_scaled"] else ""
        torch_part = ("torch n/a" if r["torch_1thread_s"] is None else
                      f"torch 1-thread {r['torch_1thread_s'] * 1e3:8.2f} ms  "
                      f"poolgrad/reference/torch {r['reference_over_torch']:5.2f}x (target <= 2)")
        print(f"max_pool2d backward {tuple(shape)} k{k} s{s} float32: "
              f"reference {r['reference_s'] * 1e3:8.2f} ms  loop {r['loop_s'] * 1e3:9.1f} ms  "
              f"loop/reference {r['loop_over_reference']:6.1f}x (target >= 20)  {torch_part}{scaled}")
    if args.json:
        env = {"python": platform.python_version(), "numpy": np.__version__,
               "machine": platform.machine(), "processor": platform.processor()}
        try:
            import torch
            env["torch"] = torch.__version__
        except ImportError:
            pass
        args.json.write_text(json.dumps({"environment": env, "results": rows}, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
