"""Segment pooling's plans (pure: no framework imported) and the (items, features) layout."""

from __future__ import annotations

import numpy as np
import pytest

import poolgrad_paddle
from poolgrad.adapters import jax as jax_plan
from poolgrad.adapters import segments
from poolgrad.adapters import tensorflow as tf_plan
from poolgrad.adapters import torch as torch_plan
from poolgrad.adapters.base import Unsupported
from poolgrad.reference import PoolSpec

SORTED = {"segment_ids": [0, 0, 2, 2, 2], "num_segments": 3}      # segment 1 empty
UNSORTED = {"segment_ids": [2, 0, 2, 1], "num_segments": 3}
TRAILING = {"segment_ids": [0, 1, 1], "num_segments": 4}           # segments 2 and 3 empty, after the last id


def spec(op="segment_max_pool", **ids):
    return PoolSpec.from_dict({"op": op, **(ids or SORTED)})


@pytest.mark.parametrize("planner, variant, api", [
    (torch_plan, "scatter_reduce", "scatter_reduce"), (torch_plan, "scatter_reduce_compile", "scatter_reduce"),
    (torch_plan, "pyg", "global_max_pool"),
    (jax_plan, "segment", "segment_max"), (jax_plan, "segment_jit", "segment_max"),
    (tf_plan, "segment", "segment_max"), (tf_plan, "unsorted_segment_function", "unsorted_segment_max"),
    (tf_plan, "segment_xla", "segment_max"), (tf_plan, "unsorted_segment_xla", "unsorted_segment_max"),
    (poolgrad_paddle, "segment", "segment_max"), (poolgrad_paddle, "segment_to_static", "segment_max"),
])
def test_segment_variants_plan_the_function_users_call(planner, variant, api):
    call = planner.plan(spec(), variant, (1, 2, 5))
    assert call == segments.Segments(api, "max", (0, 0, 2, 2, 2), 3, True)
    assert planner.plan(spec("segment_avg_pool"), variant, (1, 2, 5)).reduce == "mean"


@pytest.mark.parametrize("planner, segment_variant, other", [
    (torch_plan, "scatter_reduce", "eager"), (torch_plan, "scatter_reduce_compile", "compile"), (jax_plan, "segment", "jit"),
    (tf_plan, "unsorted_segment", "function"),
    (poolgrad_paddle, "segment", "eager"), (poolgrad_paddle, "segment_to_static", "to_static"),
])
def test_segment_ops_run_only_in_segment_variants_and_those_only_them(planner, segment_variant, other):
    assert "segment variants" in planner.plan(spec(), other, (1, 2, 5)).reason
    window = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2})
    assert "segment ids only" in planner.plan(window, segment_variant, (1, 2, 6)).reason


@pytest.mark.parametrize("planner, variant", [(tf_plan, "segment"), (tf_plan, "segment_function"),
                                              (tf_plan, "segment_xla"), (poolgrad_paddle, "segment"),
                                              (poolgrad_paddle, "segment_to_static")])
def test_sorted_only_apis_refuse_unsorted_ids_and_trailing_empty_segments(planner, variant):
    assert "sorted" in planner.plan(spec(**UNSORTED), variant, (1, 1, 4)).reason
    refused = planner.plan(spec(**TRAILING), variant, (1, 1, 3))
    assert isinstance(refused, Unsupported) and "2 empty segments after the largest id" in refused.reason


def test_unsorted_apis_take_any_ids_and_say_whether_they_are_sorted():
    assert tf_plan.plan(spec(**UNSORTED), "unsorted_segment", (1, 1, 4)).sorted is False
    assert tf_plan.plan(spec(**TRAILING), "unsorted_segment", (1, 1, 3)).num_segments == 4
    assert jax_plan.plan(spec(**UNSORTED), "segment", (1, 1, 4)).sorted is False


def test_items_lay_planes_out_as_items_by_features_and_back():
    x = np.arange(2 * 3 * 5).reshape(2, 3, 5)
    data = segments.items(x)
    assert data.shape == (5, 6) and all(data[l, n * 3 + c] == x[n, c, l]
                                        for n in range(2) for c in range(3) for l in range(5))
    assert np.array_equal(segments.planes(data, 2, 3), x)
    assert segments.planes(np.zeros((4, 6)), 2, 3).shape == (2, 3, 4)   # num_segments rows
