"""What a cold torch.compile group costs, and which inductor settings make it cheaper without
changing the kernels users get (issue 12): each setting compiles the same pooling groups
(forward + backward, distinct specs and shapes as the catalogue's groups are) in a fresh
process with an empty inductor cache, and the generated C++ of every setting is compared
with the default's, so a setting that changes the code is reported, not kept.

    python benchmarks/bench_compile.py [--groups 12] [--json out.json]

Settings: ``default`` (inductor's own: compile_threads from the CPU count, a subprocess pool
of compile workers) and ``threads1`` (TORCHINDUCTOR_COMPILE_THREADS=1: compile in the process).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SETTINGS = {
    "default": {},
    "threads1": {"TORCHINDUCTOR_COMPILE_THREADS": "1"},
}

CHILD = r"""
import hashlib, json, sys, time, glob, os
import torch
import torch.nn.functional as F
groups = int(sys.argv[1])
torch._dynamo.config.cache_size_limit = 1000
specs = [(k, s, n) for n in (5, 6, 7, 8, 9, 10) for k, s in ((2, 2), (3, 1))][:groups]
start = time.perf_counter()
for k, s, n in specs:
    fn = torch.compile(lambda t, k=k, s=s: F.max_pool2d(t, k, s), dynamic=False)
    x = torch.randn(1, 2, n, n, requires_grad=True)
    y = fn(x)
    y.backward(torch.ones_like(y))
wall = time.perf_counter() - start
code = sorted(p for p in glob.glob(os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "**", "*.cpp"), recursive=True))
digest = hashlib.sha256()
for p in code:
    text = open(p).read()
    digest.update(text.split("\n", 1)[1].encode() if text.startswith("//") else text.encode())
print(json.dumps({"wall_s": wall, "kernels": len(code), "code_sha256": digest.hexdigest()}))
"""


def run(setting: str, groups: int) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, **SETTINGS[setting], "TORCHINDUCTOR_CACHE_DIR": cache,
               "TORCHINDUCTOR_FX_GRAPH_CACHE": "1"}
        out = subprocess.run([sys.executable, "-c", CHILD, str(groups)], env=env, capture_output=True,
                             text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--groups", type=int, default=12)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    results = {name: run(name, args.groups) for name in SETTINGS}
    base = results["default"]
    for name, r in results.items():
        same = "same generated code" if r["code_sha256"] == base["code_sha256"] else "CHANGES the generated code"
        print(f"{name}: {r['wall_s']:.1f} s for {args.groups} groups ({r['kernels']} C++ kernels), "
              f"ratio to default {r['wall_s'] / base['wall_s']:.3f}, {same}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
