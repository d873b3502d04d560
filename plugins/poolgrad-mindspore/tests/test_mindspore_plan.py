"""The planner: MindSpore's arguments for a spec, and what its APIs cannot express. Pure: these
tests import no mindspore."""

from __future__ import annotations

import pytest

import poolgrad_mindspore
from poolgrad.adapters import plugin_checks
from poolgrad.adapters.base import Unsupported
from poolgrad.reference import PoolSpec


def spec(**kw):
    return PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, **kw})


def plan(variant, shape, **kw):
    return poolgrad_mindspore.plan(spec(**kw), variant, shape)


def test_the_record_is_registered_under_the_entry_point():
    record = plugin_checks.assert_registered("mindspore", "poolgrad_mindspore")
    assert record.module == "poolgrad_mindspore.adapter"
    assert set(record.costs) == set(record.variants) == set(poolgrad_mindspore.VARIANTS)
    assert record.index_layouts == {"return_indices": "plane"}
    # MaxPool3DWithArgmax's empty windows write past their plane: ops.max_pool3d and the padded cells run them alone
    assert record.unstacking("jit", "max_pool3d") and record.unstacking("nn", "max_pool2d")
    assert not record.unstacking("pynative", "max_pool2d")


def test_reading_the_record_and_planning_import_no_mindspore():
    plugin_checks.assert_planning_imports_no_framework("mindspore", {"op": "avg_pool", "kernel_size": 2}, (1, 1, 4, 4))


def test_max_pooling_takes_one_pad_per_dim_and_its_dilation():
    kw = plan("pynative", (1, 1, 6, 9), kernel_size=3, padding=[1, 0], dilation=[1, 2], ceil_mode=True)
    assert kw == {"kernel_size": (3, 3), "stride": (3, 3), "padding": (1, 0), "dilation": (1, 2), "ceil_mode": True}
    assert "asymmetric padding" in plan("jit", (1, 1, 6, 9), padding=[[1, 0], [0, 0]]).reason


def test_avg_pooling_takes_before_after_pairs_and_a_divisor_in_2d_and_3d():
    kw = plan("pynative", (1, 1, 6, 6), op="avg_pool", padding=[[1, 0], [0, 1]], count_include_pad=False,
              divisor_override=3)
    assert kw == {"kernel_size": (2, 2), "stride": (2, 2), "padding": (1, 0, 0, 1), "ceil_mode": False,
                  "count_include_pad": False, "divisor_override": 3}
    assert plan("pynative", (1, 1, 6, 6), op="avg_pool", padding=[1, 0])["padding"] == (1, 1, 0, 0)
    assert plan("nn", (1, 1, 6, 6), op="avg_pool", padding=[1, 0])["padding"] == (1, 0)
    assert plan("pynative", (1, 1, 6, 6), op="avg_pool", padding=1)["padding"] == 1
    assert "avg_pool1d (ops) has none" in plan("pynative", (1, 1, 6), op="avg_pool", divisor_override=3).reason
    for variant in ("nn", "mint"):
        assert f"{variant}'s avg pooling takes one pad" in plan(variant, (1, 1, 6), op="avg_pool", padding=[[1, 0]]).reason


def test_the_cells_spell_same_and_valid_as_pad_modes_and_explicit_pads_as_pad():
    assert plan("nn", (1, 1, 7), padding="SAME", stride=1)["pad_mode"] == "same"
    kw = plan("nn", (1, 1, 7), padding=1)
    assert kw["pad_mode"] == "pad" and kw["padding"] == 1
    # the functions have no string padding: SAME as the pads it resolves to
    assert plan("pynative", (1, 1, 7, 7), kernel_size=3, padding="SAME", stride=1)["padding"] == (1, 1)


def test_lp_pooling_leads_with_norm_type_and_has_no_padding():
    assert plan("pynative", (1, 1, 6), op="lp_pool", norm_type=2) == {
        "norm_type": 2.0, "kernel_size": 2, "stride": 2, "ceil_mode": False}
    assert "has no padding" in plan("pynative", (1, 1, 6), op="lp_pool", norm_type=2, padding=1).reason


def test_adaptive_output_size_is_an_int_in_1d_and_indices_are_asked_where_offered():
    assert plan("pynative", (1, 1, 7), op="adaptive_avg_pool", kernel_size=None, output_size=3) == {"output_size": 3}
    assert plan("return_indices", (1, 1, 7, 5), op="adaptive_max_pool", kernel_size=None, output_size=[3, 2]) == {
        "output_size": (3, 2), "return_indices": True}


@pytest.mark.parametrize("variant, shape, kw, says", [
    ("pynative", (1, 1, 6), {}, "mindspore.ops.max_pool1d: MindSpore has no such function"),
    ("nn", (1, 1, 6, 6, 6), {"op": "lp_pool", "norm_type": 2}, "mindspore.nn.LPPool3d: MindSpore has no such cell"),
    ("mint", (1, 1, 6, 6, 6), {}, "mindspore.mint.nn.functional.max_pool3d"),
    ("return_indices", (1, 1, 6, 6), {"op": "avg_pool"}, "returns no indices"),
    ("return_indices", (1, 1, 6), {"op": "adaptive_max_pool", "kernel_size": None, "output_size": 2},
     "returns no indices"),
    ("pynative", (1, 1, 6, 6), {"op": "avg_pool", "dilation": 2}, "has no dilation"),
    ("pynative", (1, 1, 6, 6), {"op": "fractional_max_pool", "kernel_size": None, "regions": [[[0, 3], [3, 6]]] * 2},
     "_random_samples"),
])
def test_what_mindspore_cannot_express_is_unsupported_with_the_reason(variant, shape, kw, says):
    planned = plan(variant, shape, **kw)
    assert isinstance(planned, Unsupported) and says in planned.reason


def test_an_unknown_variant_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown mindspore variant 'graph'"):
        plan("graph", (1, 1, 4))
