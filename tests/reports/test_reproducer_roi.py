"""The reproducer of a RoI pooling record (torchvision's roi_pool / roi_align, TensorFlow's
crop_and_resize then avg or max pooling, PaddlePaddle's vision ops) reprints exactly the gradient
the framework returned and exits 1 where the framework's result is not the spec's, naming the
differing cells.

The framework is called directly (reports_direct_roi.py, the planner's call written out by hand),
first in the one fresh interpreter where the records' scripts then run (repro_runs.py), so the
framework is imported once: the scripts are rendered before the framework's gradients are known,
from records that differ from the final ones only in the verdict they print."""

from __future__ import annotations

import dataclasses
import html as htmllib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import repro_runs

from poolgrad.adapters import registry
from poolgrad.adapters.base import Target
from poolgrad.reference import PoolSpec, backward, error_scale, forward
from poolgrad.reports import html, reproducer, synthetic
from poolgrad.verdicts import tolerances
from poolgrad.verdicts.compare import same_bits, within

HERE = Path(__file__).parent
RNG = np.random.default_rng(40)
# Two images of distinct values; per case the pixels that make a framework diverge (or none).
X = RNG.permutation(2 * 4 * 5).reshape(2, 1, 4, 5).astype(np.float64)
CROP = {"op": "roi_crop_max_pool2d", "output_size": 2, "kernel_size": 2, "stride": 1}
ALIGN = {"op": "roi_align2d", "output_size": 2, "sampling_ratio": 2}
ROI_POOL = {"op": "roi_pool2d", "output_size": 2}
# (framework, variant, spec, pixels set): the boxes list image 1 first, so paddle's grouping by
# image reorders them; a divergent case per framework, from its findings:
# tf-crop-and-resize-border-samples-extrapolated (a sample in [-1, 0) is 0, not the border pixel),
# tf-crop-and-resize-infinite-corner-nan, paddle-roi-pool-skips-nan.
BOXES = [[1, 0.5, 0.5, 3.5, 2.5], [0, 1.0, 0.0, 4.0, 3.0]]
CASES = [("tensorflow", "crop_and_resize", {**ALIGN, "boxes": [[1, -0.5, 0.0, 3.0, 3.0], *BOXES]}, {}),
         ("tensorflow", "crop_and_resize_max", {**CROP, "boxes": BOXES}, {}),
         ("tensorflow", "crop_and_resize_max_function", {**CROP, "boxes": BOXES}, {(0, 0, 1, 2): np.inf}),
         ("paddle", "vision_ops", {**ROI_POOL, "boxes": BOXES}, {(1, 0, 1, 1): np.nan}),
         ("paddle", "vision_ops", {**ALIGN, "boxes": BOXES, "aligned": True}, {}),
         ("torch", "torchvision", {**ROI_POOL, "boxes": BOXES}, {(1, 0, 1, 1): np.nan}),
         ("torch", "torchvision", {**ALIGN, "boxes": BOXES, "sampling_ratio": -1}, {})]


def case(spec_dict, pixels):
    spec = PoolSpec.from_dict({**spec_dict, "dtype": "float32"})
    x = X.copy()
    for at, value in pixels.items():
        x[at] = value
    x = x.astype(np.float32)
    g = np.ldexp(1.0, np.arange(len(spec.boxes) * 4) % 12).reshape(-1, 1, 2, 2).astype(np.float32)
    return spec, x, g


def differs(spec, x, g, y, dx) -> tuple[bool, list[list[int]]]:
    """Whether the framework's (y, dx) is not the spec's result, as poolgrad compares them, and the
    gradient's differing cells (the first 16, as a script lists them)."""
    ref, ok = (forward(spec, x), backward(spec, x, g)), []
    scales = None if spec.is_max else error_scale(spec, x, g)
    for i, (got, want) in enumerate(zip((y, dx), ref)):
        ok.append(same_bits(got, want) if scales is None else
                  within(got, want, tolerances.bound(spec.op, x.dtype, scales[i])))
    return not all(o.all() for o in ok), [list(map(int, c)) for c in np.argwhere(~ok[1])[:16]]


@pytest.mark.parametrize("framework", sorted({f for f, *_ in CASES}))
def test_roi_reproducers_reprint_the_frameworks_gradient(framework, tmp_path):
    api = next(v for f, v, *_ in CASES if f == framework)
    if not registry.installed(framework, api):
        pytest.skip(f"{framework}'s {api} is not installed")
    cases = [(v, *case(spec, pixels)) for f, v, spec, pixels in CASES if f == framework]
    records, paths, calls = [], [], []
    for i, (variant, spec, x, g) in enumerate(cases):
        calls.append({"call": dataclasses.asdict(registry.plan(Target(framework, variant, "cpu"), spec, x.shape)),
                      "x": x.tolist(), "g": g.tolist(), "dtype": "float32"})
        records.append(synthetic.result(f"roi-{i}", "user", spec.to_dict(), x, g, framework=framework,
                                        variant=variant, run_id="direct"))
        paths.append(tmp_path / f"repro_{i}.py")
        paths[-1].write_text(reproducer.script(records[-1]))
    (tmp_path / "roi_calls.json").write_text(json.dumps({"framework": framework, "calls": calls}))
    shutil.copy(HERE / "reports_direct_roi.py", tmp_path / "direct.py")
    direct, *ran = repro_runs.run_together([tmp_path / "direct.py", *paths])
    assert direct.returncode == 0, direct.stderr[-2000:]
    diverged, returned = [], json.loads(direct.stdout)
    for i, ((variant, spec, x, g), (y, dx), out) in enumerate(zip(cases, returned, ran, strict=True)):
        rendered, (y, dx) = records[i], (np.array(a, dtype=np.float32) for a in (y, dx))
        rec = synthetic.result(rendered["case_id"], "user", spec.to_dict(), x, g, framework=framework,
                               variant=variant, run_id="direct", grad_input=dx)
        # What ran is the final record's script: only the verdict it prints was not known then.
        verdict = f"RECORDED_VERDICT = {rec['verdict']!r}"
        assert reproducer.script(rec) == reproducer.script(rendered).replace("RECORDED_VERDICT = 'conforms'", verdict)
        printed = reproducer.read_output(out.stdout)
        assert printed["gradient"]["actual"] == rec["grad_input"], f"{variant}: {out.stderr[-2000:]}"
        assert printed["gradient"]["expected"] == rec["expected_grad_input"], variant
        diverges, cells = differs(spec, x, g, y, dx)
        assert out.returncode == int(diverges), f"{variant}: {out.stdout[-3000:]}{out.stderr[-2000:]}"
        named = re.findall(r"\((\d+(?:, \d+)*)\) expected", printed["gradient"].get("differ", ""))
        assert [list(map(int, c.split(", "))) for c in named] == cells, variant
        diverged.append(diverges)
        records[i] = rec
    assert True in diverged and False in diverged  # each framework's scripts exit 1 and 0
    # The report carries each divergent record's script.
    report = html.write_html([synthetic.environment("direct"), *records], tmp_path / "r.html")
    in_report = [htmllib.unescape(s) for s in
                 re.findall(r'<pre class="repro"[^>]*>(.*?)</pre>', (tmp_path / "r.html").read_text(), re.S)]
    divergent = [reproducer.script(r) for r in records if r["verdict"] != "conforms"]
    assert len(in_report) == len(report.divergences) == len(divergent) > 0
    assert all(script in in_report for script in divergent)
