"""The knowledge base as data: every finding is written knowledge (no generated text, no machine
paths, a link or "no upstream report"), its scope names real targets and properties, and
version ranges come from the measured history. The pages generated from it:
tests/cases/test_semantics_pages.py."""

import json
import re
from pathlib import Path

import pytest

from poolgrad.adapters.registry import FRAMEWORKS
from poolgrad.knowledge import sources
from poolgrad.knowledge.finding import NO_UPSTREAM
from poolgrad.knowledge.history import version_range
from poolgrad.knowledge.impacts import IMPACTS
from poolgrad.knowledge.scope import version_in

ROOT = Path(__file__).parents[2]
KB = sources.load()
POOLGRADS = ("torch", "tensorflow", "jax")  # the frameworks poolgrad itself registers


@pytest.mark.parametrize("finding", KB, ids=lambda f: f.id)
def test_a_finding_is_written_knowledge(finding):
    text = " ".join((finding.title, finding.behaviour, finding.source, finding.since))
    assert not re.search(r"observed with \w+ \d|(^|[\s\"(])/(work|tmp|root|home)/|site-packages", text)
    assert "TODO" not in text and len(finding.behaviour) > 80
    assert finding.impact in IMPACTS  # what it means for training (README, --fail-on)
    assert finding.link == NO_UPSTREAM or re.match(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$",
                                                          finding.link)
    fw = FRAMEWORKS[finding.framework]
    assert all(any(re.fullmatch(p.replace("*", ".*"), v) for v in fw.variants) for p in finding.variants)


def test_the_knowledge_base_is_curated_not_a_dump():
    # 81: the Keras adaptive max JVP shape error (issue 14) is an error no existing finding can also claim
    # 82: oneDNN's float16 gradient sums on AVX512-FP16 CPUs, which no float32 order explains
    # 83-85: behaviours that random draws of the catalogue's cases and stacked calls of users' size show:
    # torch.compile's 2-D stray gradient, YNNPACK's NaN order and its unflushed bfloat16 forward
    # 86-93: the GPU column (issue 15): CUDA's (max and avg_pool3d) and XLA:GPU's atomic gradient adds, CUDA's 2-D float32
    # sums, channels-last padding and seed faults, its empty-window index, torch 2.11 compile's padding
    # rule; CPU entries whose behaviour the GPU shares were widened to both devices, not copied
    # 94-105: lp pooling's unread NaN (e0c19df), AvgPool's float32 sum overflow (6298fdf) and fractional
    # max pooling (issue 30): torch's last NaN, dtype sums and 3-D refusal of unit steps, TensorFlow's
    # NaN skip, its gradient's refusal of a NaN-first or all -inf region, its dtype sums and its missing
    # second-order gradient
    # 106-132: pooling written as a reduction (issue 30): ties split, NaN windows, signed zeros (of
    # the forward and of mask * g gradients) and subnormals of amax / reduce_max / jnp.max, and what
    # unfold / extract_patches / conv patches and TensorFlow's 3-D reshape add; 133-135: written
    # beside them since (see git log); 136: JAX's forward mode under an uneven SAME pad (7c85eee);
    # 137: FractionalMaxPoolGrad's refusal of an unpooled axis on a small input (the CI's fuzz)
    # 138-139: the second GPU column (an H200): CUDA's amax keeps either tied zero, XLA:GPU's forward
    # mode on uneven SAME pads follows no visiting order
    # 140-141: what the H200's torch 2.11 compile residue showed in direct calls: forward mode reads
    # an all -inf window's tangent at the padding tap's index, and 3-D adaptive max pooling with even
    # bins ran the eager kernel before PR 184396
    # 142-143: torchvision's RoI pooling (issue 40): roi_pool's NaN skip and its float32 seed in float64
    # 144-160: segment pooling (issue 40): scatter_reduce's, segment_max's and unsorted_segment_max's
    # empty-segment values, tie splits, NaN and -inf gradients, zero signs of mask * g gradients
    # 161-162: RoI pooling (issue 40): torchvision roi_align's corners of weight 0, TensorFlow's
    # crop_and_resize border samples
    # 163: the third GPU column (an H200): torchvision's CUDA RoI gradients added with atomics
    # 164: the same column contradicted torch-avg-sum-overflows-float32 on float16 (CUDA adds it in
    # float32): its float16 part, CPU 3-D adaptive average pooling, is a finding of its own
    # 165: TensorFlow detectors' crop_and_resize + max_pool2d (issue 40): infinite pixels interpolate to NaN
    # 166: FractionalMaxPool's type list without float16 and bfloat16 (issue 38: an error, which
    # the planner had refused as unsupported)
    # 167-169: compiled segment and RoI pooling (issue 40): TensorFlow's XLA unsorted segment max skips NaN,
    # and the bridge has no kernel for the sorted segment ops nor for crop_and_resize
    # 170-171: missing derivative rules that were unsupported (issue 38, item 3): torch.compile's double
    # backward, MaxPoolGradWithArgmax's gradient
    # 172-173: the fourth GPU column (an H200): CUDA adaptive average pooling's atomic adds, and
    # scatter_reduce(amax)'s atomic max keeping the sign of the last tied zero
    # 174: --ad-modes all: lp_pool's product rule gives a NaN-sum window a NaN tangent (norm_type 1)
    # 175: --ad-modes all: pow's derivative at a zero power sum gives the window a NaN tangent
    # 176: --ad-modes all: Keras adaptive average pooling's empty big pool refused by forward mode
    # 177-179: --ad-modes all: TensorFlow's forward mode of the segment ops (the transposed gradient
    # divides by an empty segment's zero count, and differentiates unsorted_segment_mean's count)
    # 180: --ad-modes all: torch's lp derivatives of a float32 power sum that overflowed
    # 181: --ad-modes all: JAX's max JVP rule over conv patches made NaN by an infinity
    # 182: tf.nn.pool zero-pads a dilated window's explicit pads (the stride-1 dilation rows, issue 38)
    # 183-184: Keras's adaptive average pooling (TF and JAX backends) averages one axis at a time, so
    # a column's sum overflows where the window's mean is finite (held-out style realistic data)
    # 185: Keras's 3-D adaptive max takes MaxPool3DGrad's near ties one pass at a time (the same data)
    # 186: TensorFlow's CPU AvgPool counts a float16 window in float16, stopping at 2048 (issue 38)
    own = [f for f in KB if f.framework in POOLGRADS]  # a plugin's knowledge is its own to curate
    # 187: torch.max(dim)'s gradient assigns g at the index, so an upstream -0.0 stays -0.0 (network-like data)
    # 188: jnp.max's gradient counts a window's tied maxima in the dtype (network-like data)
    assert 25 <= len(own) <= 188
    assert len({(f.framework, f.title) for f in KB}) == len(KB)


def _history(per_release):
    lanes = [{"lane": f"torch-{v}", "framework": "torch", "version": v} for v in per_release]
    return {"format": "poolgrad-history/1", "lanes": lanes,
            "findings": {"f": {f"torch-{v}": c for v, c in per_release.items()}}}


@pytest.mark.parametrize("per_release, expected", [
    ({"2.10.0": [0, 3], "2.11.0": [4, 0], "2.13.0": [4, 0]}, ">=2.11.0"),
    ({"2.11.0": [4, 0], "2.13.0": [4, 0], "2.14.1": [0, 5]}, "<2.14.1"),
    ({"2.10.0": [0, 1], "2.12.1": [2, 0], "2.15.0": [0, 2]}, ">=2.12.1,<2.15.0"),
    ({"2.11.0": [4, 0], "2.13.0": [4, 0]}, ""),          # holds at both edges: open
    ({"2.11.0": [0, 0], "2.13.0": [4, 0]}, ""),          # not seen is not a contradiction
    ({"2.11.0": [0, 3]}, ""),                             # never held: no range to draw
])
def test_version_range_is_bounded_only_where_a_measured_release_contradicts(per_release, expected):
    assert version_range(_history(per_release), "f") == expected


def test_loaded_findings_carry_their_measured_range(tmp_path):
    hist = _history({"2.10.0": [0, 2], "2.13.0": [5, 0]})
    hist["findings"] = {"torch-max-last-nan-wins": hist["findings"]["f"]}
    path = tmp_path / "history.json"
    path.write_text(json.dumps(hist))
    kb = sources.load(history=path)
    f = next(f for f in kb if f.id == "torch-max-last-nan-wins")
    assert str(f.versions) == ">=2.13.0"
    assert not version_in(str(f.versions), "2.10.0+cpu") and version_in(str(f.versions), "2.14.1")


def test_the_committed_history_holds_counts_not_machine_paths():
    files = sources.history_files()
    for path in files:
        assert not re.search(r"/(work|tmp|root|home)/", path.read_text()), path
        # each framework's lanes in its own package
        assert {lane["framework"] for lane in json.loads(path.read_text())["lanes"]} <= {path.parent.name,
                                                                                       path.parent.name.removeprefix("poolgrad_")}
    hist = sources.load().history
    assert {lane["framework"] for lane in hist["lanes"]} >= set(POOLGRADS)
    for fw in POOLGRADS:  # at least four releases of each framework measured
        assert len({lane["version"] for lane in hist["lanes"] if lane["framework"] == fw}) >= 4
    assert all(len(c) == 2 and all(isinstance(n, int) for n in c)
               for per in hist["findings"].values() for c in per.values())
