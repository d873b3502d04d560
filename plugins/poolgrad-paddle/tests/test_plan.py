"""The paddle planner and registration: pure, no paddle imported (poolgrad's collection runs them)."""

from __future__ import annotations


import pytest

import poolgrad_paddle
from poolgrad_paddle import roi
from poolgrad.adapters import plugin_checks, registry
from poolgrad.adapters.base import Unsupported
from poolgrad.reference import PoolSpec

plan = poolgrad_paddle.plan


def spec(**kw):
    return PoolSpec.from_dict(kw)


def test_importing_the_planner_and_its_record_imports_no_paddle():
    plugin_checks.assert_planning_imports_no_framework("paddle", {"op": "max_pool2d", "kernel_size": 2}, (1, 1, 4, 4))


def test_the_entry_point_registers_the_record_with_what_the_suite_schedules_by():
    fw = plugin_checks.assert_registered("paddle", "poolgrad_paddle")
    assert fw.variants == (*poolgrad_paddle.VARIANTS, *roi.ROI_VARIANTS)
    assert fw.worker("vision_ops").planner == "poolgrad_paddle.roi"
    assert fw.index_layouts == {"return_mask": "plane"}
    assert registry.installed_version("paddle") is not None


def test_roi_boxes_go_to_paddle_grouped_by_image():
    boxes = [[1, 0, 0, 2, 2], [0, 1, 1, 3, 3], [1, 2, 2, 4, 4], [0, 0, 1, 2, 3]]
    planned = roi.plan(spec(op="roi_pool", boxes=boxes, output_size=2, dtype="float32"), "vision_ops", (3, 1, 5, 5))
    assert planned.order == (1, 3, 0, 2) and planned.boxes_num == (2, 2, 0)
    assert isinstance(roi.plan(spec(op="roi_pool", boxes=boxes, output_size=2, dtype="float16"), "vision_ops",
                               (3, 1, 5, 5)), Unsupported)
    assert isinstance(roi.plan(spec(op="max_pool2d", kernel_size=2), "vision_ops", (1, 1, 4, 4)), Unsupported)


def test_count_include_pad_is_paddles_exclusive_inverted():
    kw = plan(spec(op="avg_pool2d", kernel_size=3, stride=2, padding=1, count_include_pad=False), "eager", (1, 1, 7, 7))
    assert kw == {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": False, "exclusive": True}


def test_padding_forms():
    shape = (1, 1, 6, 6)
    symmetric = plan(spec(op="max_pool2d", kernel_size=3, padding=[1, 0]), "eager", shape)
    assert symmetric["padding"] == (1, 0)
    pairs = plan(spec(op="max_pool2d", kernel_size=3, padding=[[0, 1], [2, 1]]), "eager", shape)
    assert pairs["padding"] == (0, 1, 2, 1)  # paddle's flat [before, after] per dim
    assert plan(spec(op="max_pool2d", kernel_size=2, padding="SAME"), "eager", shape)["padding"] == "SAME"
    one_d = plan(spec(op="avg_pool1d", kernel_size=3, padding=1), "eager", (1, 1, 6))
    assert one_d["kernel_size"] == 3 and one_d["stride"] == 3 and one_d["padding"] == 1


def test_variants_add_their_arguments():
    s = spec(op="max_pool3d", kernel_size=2)
    assert plan(s, "channels_last", (1, 2, 4, 4, 4))["data_format"] == "NDHWC"
    assert plan(s, "return_mask", (1, 2, 4, 4, 4))["return_mask"] is True
    assert plan(spec(op="adaptive_max_pool1d", output_size=3), "return_mask", (1, 1, 7)) == {"output_size": 3, "return_mask": True}
    assert plan(spec(op="lp_pool1d", kernel_size=2, norm_type=2), "channels_last", (1, 1, 6))["data_format"] == "NLC"


@pytest.mark.parametrize("s, variant, shape, reason", [
    ({"op": "max_pool2d", "kernel_size": 2, "dilation": 2}, "eager", (1, 1, 6, 6), "no dilation"),
    ({"op": "lp_pool3d", "kernel_size": 2, "norm_type": 2}, "eager", (1, 1, 4, 4, 4), "no lp_pool3d"),
    ({"op": "avg_pool1d", "kernel_size": 2, "divisor_override": 3}, "eager", (1, 1, 6), "avg_pool1d has none"),
    ({"op": "max_pool1d", "kernel_size": 2}, "channels_last", (1, 1, 6), "no data_format"),
    ({"op": "adaptive_max_pool2d", "output_size": 2}, "channels_last", (1, 1, 6, 6), "no data_format"),
    ({"op": "avg_pool2d", "kernel_size": 2}, "return_mask", (1, 1, 6, 6), "returns no mask"),
    ({"op": "max_pool2d", "kernel_size": 3, "padding": [[0, 1], [0, 1]]}, "return_mask", (1, 1, 6, 6), "symmetric pad"),
    ({"op": "fractional_max_pool1d", "regions": [[[0, 2], [2, 4]]]}, "eager", (1, 1, 4), "2-D and 3-D only"),
    # one region along a dim of 3 always starts at 0 in paddle's formula
    ({"op": "fractional_max_pool2d", "regions": [[[0, 2], [2, 4]], [[1, 3]]]}, "eager", (1, 1, 4, 3),
     "no random_u gives"),
    ({"op": "fractional_max_pool2d", "regions": [[[0, 2], [2, 4]], [[0, 2], [2, 4]]]}, "channels_last", (1, 1, 4, 4),
     "no data_format"),
])
def test_what_paddle_has_no_argument_for_is_unsupported_with_the_reason(s, variant, shape, reason):
    got = plan(spec(**s), variant, shape)
    assert isinstance(got, Unsupported) and reason in got.reason


def test_fractional_regions_follow_paddles_kernel():
    # paddle's documented example (fractional_max_pool2d): length 7, output 5, random_u 0.3 gives the
    # starts [0, 1, 3, 4, 6] and the ends [1, 3, 4, 6, 7]
    assert poolgrad_paddle.fractional_regions(0.3, 7, 5, 0) == ((0, 1), (1, 3), (3, 4), (4, 6), (6, 7))
    # kernel 2 over length 5, output 3: alpha = 1.5, starts int((i + 0.5) * 1.5) - int(0.5 * 1.5) = 0, 2, 3
    assert poolgrad_paddle.fractional_regions(0.5, 5, 3, 2) == ((0, 2), (2, 4), (3, 5))


def test_fractional_cases_get_the_random_u_and_kernel_size_that_give_their_regions():
    s = spec(op="fractional_max_pool2d", regions=[[[0, 1], [1, 3], [3, 4], [4, 6], [6, 7]], [[0, 2], [2, 4]]])
    kw = plan(s, "return_mask", (1, 1, 7, 4))
    assert kw["output_size"] == (5, 2) and kw["kernel_size"] is None and kw["return_mask"] is True
    assert [poolgrad_paddle.fractional_regions(kw["random_u"], n, len(r), 0) for n, r in zip((7, 4), s.regions)] == \
        [tuple(r) for r in s.regions]
    same_size = plan(spec(op="fractional_max_pool2d", regions=[[[0, 2], [1, 3], [3, 5]]] * 2), "eager", (1, 1, 5, 5))
    assert same_size["kernel_size"] == (2, 2) and 0 < same_size["random_u"] < 1


def test_to_static_bfloat16_runs_where_building_the_program_raises():
    # pool3d and max_pool3d_with_index have no bfloat16 CPU kernel: the program builder raises (an error)
    for s in ({"op": "max_pool3d", "kernel_size": 2}, {"op": "adaptive_max_pool2d", "output_size": 2}):
        shape = (1, 1, 4, 4, 4) if s["op"].endswith("3d") else (1, 1, 4, 4)
        assert not isinstance(plan(spec(**s, dtype="bfloat16"), "to_static", shape), Unsupported)


def test_return_mask_passes_same_as_the_user_writes_it():
    # SAME resolves to pads (0, 1) here; the user's call says "SAME", and paddle decides.
    kw = plan(spec(op="max_pool1d", kernel_size=2, stride=1, padding="SAME"), "return_mask", (1, 1, 5))
    assert kw["padding"] == "SAME"
