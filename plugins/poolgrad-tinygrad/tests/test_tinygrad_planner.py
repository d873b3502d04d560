"""The planner: tinygrad's arguments for a spec, and what it cannot express. Pure: these tests
import no tinygrad."""

from __future__ import annotations


import pytest

import poolgrad_tinygrad
from poolgrad.adapters import plugin_checks
from poolgrad.adapters.base import Unsupported
from poolgrad.reference import PoolSpec


def spec(**kw):
    return PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, **kw})


def test_the_record_is_registered_under_the_entry_point():
    record = plugin_checks.assert_registered("tinygrad", "poolgrad_tinygrad")
    assert record.module == "poolgrad_tinygrad.adapter"
    assert set(record.variants) == {"eager", "jit", "gradient"} and set(record.costs) == set(record.variants)


def test_reading_the_record_and_planning_import_no_tinygrad():
    plugin_checks.assert_planning_imports_no_framework("tinygrad", {"op": "max_pool", "kernel_size": 2}, (1, 1, 4))


def test_padding_is_flat_before_after_pairs_from_the_last_dim():
    kw = poolgrad_tinygrad.plan(spec(kernel_size=3, padding=[[1, 0], [0, 2]], dilation=[1, 2], ceil_mode=True),
                                "eager", (1, 1, 6, 9))
    assert kw == {"kernel_size": (3, 3), "stride": (3, 3), "dilation": (1, 2), "padding": (0, 2, 1, 0), "ceil_mode": True}


def test_same_padding_is_resolved_and_avg_takes_count_include_pad():
    kw = poolgrad_tinygrad.plan(spec(op="avg_pool", padding="SAME", stride=1, count_include_pad=False), "jit", (1, 1, 5))
    assert kw["padding"] == (0, 1) and kw["count_include_pad"] is False


@pytest.mark.parametrize("kw, says", [
    ({"op": "avg_pool", "divisor_override": 3}, "divisor_override"),
    ({"op": "lp_pool", "norm_type": 2}, "no lp_pool"),
    ({"op": "adaptive_avg_pool", "kernel_size": None, "output_size": 2}, "no adaptive_avg_pool"),
])
def test_what_tinygrad_cannot_express_is_unsupported_with_the_reason(kw, says):
    planned = poolgrad_tinygrad.plan(spec(**kw), "eager", (1, 1, 6))
    assert isinstance(planned, Unsupported) and says in planned.reason


def test_an_unknown_variant_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown tinygrad variant 'compile'"):
        poolgrad_tinygrad.plan(spec(), "compile", (1, 1, 4))
