"""The planner: which specs mlx.nn's pooling layers express, and with which arguments. Pure:
these tests import no MLX."""

from __future__ import annotations


import pytest

import poolgrad_mlx
from poolgrad.adapters import plugin_checks
from poolgrad.adapters.base import Unsupported
from poolgrad.reference import PoolSpec


def spec(**kw):
    return PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, **kw})


def test_the_record_is_registered_under_the_entry_point():
    record = plugin_checks.assert_registered("mlx", "poolgrad_mlx")
    assert record.module == "poolgrad_mlx.adapter"
    assert set(record.variants) == {"eager", "compile"} and set(record.costs) == set(record.variants)


def test_reading_the_record_and_planning_import_no_mlx():
    plugin_checks.assert_planning_imports_no_framework("mlx", {"op": "max_pool", "kernel_size": 2}, (1, 1, 4))


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_per_dim_arguments_with_one_symmetric_pad(rank):
    shape = (2, 3, *(7 - i for i in range(rank)))
    kw = poolgrad_mlx.plan(spec(op="avg_pool", kernel_size=3, stride=2, padding=1), "eager", shape)
    assert kw == {"kernel_size": (3,) * rank, "stride": (2,) * rank, "padding": (1,) * rank}


def test_ceil_mode_without_an_extra_window_is_the_floor_call():
    # 6 elements, k2 s2: floor and ceil both give 3 windows
    assert poolgrad_mlx.plan(spec(stride=2, ceil_mode=True), "compile", (1, 1, 6)) == \
        poolgrad_mlx.plan(spec(stride=2), "compile", (1, 1, 6))


@pytest.mark.parametrize("kw, shape, says", [
    ({"stride": 2, "ceil_mode": True}, (1, 1, 7), "ceil_mode"),
    ({"dilation": 2}, (1, 1, 7), "dilation"),
    ({"padding": [[1, 0]]}, (1, 1, 7), "asymmetric padding"),
    ({"padding": "SAME", "stride": 1}, (1, 1, 7), "SAME resolves"),
    ({"op": "avg_pool", "padding": 1, "count_include_pad": False}, (1, 1, 7), "count_include_pad=False"),
    ({"op": "avg_pool", "divisor_override": 3}, (1, 1, 7), "divisor_override"),
    ({"op": "lp_pool", "norm_type": 2}, (1, 1, 7), "no lp_pool layer"),
    ({"op": "adaptive_max_pool", "kernel_size": None, "output_size": 3}, (1, 1, 7), "no adaptive_max_pool layer"),
])
def test_what_the_layers_cannot_express_is_unsupported_with_the_reason(kw, shape, says):
    planned = poolgrad_mlx.plan(spec(**kw), "eager", shape)
    assert isinstance(planned, Unsupported) and says in planned.reason


def test_count_include_pad_false_without_padding_is_the_plain_mean():
    assert not isinstance(poolgrad_mlx.plan(spec(op="avg_pool", count_include_pad=False), "eager", (1, 1, 6)), Unsupported)


def test_an_unknown_variant_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown mlx variant 'jit'"):
        poolgrad_mlx.plan(spec(), "jit", (1, 1, 4))
