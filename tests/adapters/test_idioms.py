"""Pooling as users write it (poolgrad/adapters/idioms.py and each planner's idiom variants): which
specs each idiom plans and why it refuses the others, without importing a framework."""

from __future__ import annotations

import pytest

from poolgrad.adapters import jax as jax_plan, keras as keras_plan, registry, tensorflow as tf_plan, torch as torch_plan
from poolgrad.adapters.base import Unsupported
from poolgrad.reference import PoolSpec

GLOBAL_MAX = {"op": "adaptive_max_pool", "output_size": 1}
GLOBAL_AVG = {"op": "adaptive_avg_pool", "output_size": 1}
# Every global variant, the planner it belongs to, and the ops it computes.
GLOBALS = [(torch_plan, "amax", ("adaptive_max_pool",)), (torch_plan, "max_dim", ("adaptive_max_pool",)),
           (torch_plan, "mean", ("adaptive_avg_pool",)),
           *[(tf_plan, v, ("adaptive_max_pool", "adaptive_avg_pool")) for v in ("reduce", "reduce_function", "reduce_xla")],
           *[(jax_plan, v, ("adaptive_max_pool", "adaptive_avg_pool")) for v in ("reduce", "reduce_jit")],
           *[(keras_plan, v, ("adaptive_max_pool", "adaptive_avg_pool")) for v in ("keras_global", "keras_global_cf")]]
SHAPES = {1: (2, 3, 8), 2: (2, 3, 4, 6), 3: (1, 2, 4, 2, 6)}


def plan(planner, spec: dict, variant: str, shape):
    return planner.plan(PoolSpec.from_dict(spec), variant, shape)


@pytest.mark.parametrize("planner, variant, ops", GLOBALS, ids=[f"{p.__name__.split('.')[-1]}-{v}" for p, v, _ in GLOBALS])
def test_a_global_variant_plans_exactly_the_global_cases_of_its_ops(planner, variant, ops):
    for rank, shape in SHAPES.items():
        for spec in (GLOBAL_MAX, GLOBAL_AVG):
            planned = plan(planner, spec, variant, shape)
            assert isinstance(planned, Unsupported) == (spec["op"] not in ops), (spec, rank, planned)
        # output size 1 only on some axes, or a sliding window over the whole input: no global reduction
        partial = plan(planner, {**GLOBAL_MAX, "output_size": (1,) * (rank - 1) + (2,)}, variant, shape)
        assert isinstance(partial, Unsupported) and "output size" in partial.reason
        whole = plan(planner, {"op": "max_pool", "kernel_size": shape[2:]}, variant, shape)
        assert isinstance(whole, Unsupported) and "max_pool" in whole.reason


def test_global_calls_reduce_every_spatial_axis_in_the_variants_layout():
    assert plan(torch_plan, GLOBAL_MAX, "amax", SHAPES[3]) == {"dim": (2, 3, 4), "keepdim": True}
    assert plan(torch_plan, GLOBAL_MAX, "max_dim", SHAPES[2]) == {"dim": 2, "keepdim": True}  # after flatten(2)
    assert plan(tf_plan, GLOBAL_AVG, "reduce_xla", SHAPES[2]).axes == (1, 2)  # channels-last
    assert plan(jax_plan, GLOBAL_MAX, "reduce", SHAPES[1]).axes == (2,)
    cl, cf = (plan(keras_plan, GLOBAL_MAX, v, SHAPES[3]) for v in ("keras_global", "keras_global_cf"))
    assert (cl.name, cl.data_format, cl.keepdims) == ("GlobalMaxPooling3D", "channels_last", False)
    assert (cf.name, cf.data_format, cf.keepdims) == ("GlobalMaxPooling3D", "channels_first", True)


RESHAPES = [(torch_plan, "reshape"), (tf_plan, "reshape"), (jax_plan, "reshape")]


@pytest.mark.parametrize("planner, variant", RESHAPES, ids=[p.__name__.split(".")[-1] for p, _ in RESHAPES])
def test_reshape_plans_tiling_windows_and_says_why_not_otherwise(planner, variant):
    shape = (2, 3, 4, 6)
    for spec in ({"op": "max_pool", "kernel_size": 2}, {"op": "avg_pool", "kernel_size": (2, 3), "divisor_override": 6},
                 {"op": "adaptive_max_pool", "output_size": (2, 3)}, GLOBAL_AVG):
        assert not isinstance(plan(planner, spec, variant, shape), Unsupported), spec
    refused = {"not divisible": {"op": "max_pool", "kernel_size": 4},
               "stride": {"op": "max_pool", "kernel_size": 2, "stride": 1},
               "pads nothing": {"op": "max_pool", "kernel_size": 2, "padding": 1, "ceil_mode": True},
               "dilation": {"op": "max_pool", "kernel_size": 2, "dilation": 2},
               "uneven": {"op": "adaptive_avg_pool", "output_size": (3, 4)},
               "divisor_override": {"op": "avg_pool", "kernel_size": 2, "divisor_override": 3},
               "lp_pool": {"op": "lp_pool", "kernel_size": 2, "norm_type": 2}}
    for why, spec in refused.items():
        planned = plan(planner, spec, variant, shape)
        assert isinstance(planned, Unsupported) and why in planned.reason, (spec, planned)


def test_reshape_splits_each_axis_into_windows_and_taps():
    assert plan(torch_plan, {"op": "max_pool", "kernel_size": (2, 3)}, "reshape", (2, 3, 4, 6)) == \
        {"shape": (2, 3, 2, 2, 2, 3), "dim": (3, 5)}
    call = plan(tf_plan, {"op": "adaptive_avg_pool", "output_size": (2, 3)}, "reshape", (2, 3, 4, 6))
    assert (call.shape, call.axes) == ((2, 2, 2, 3, 2, 3), (2, 4))  # channels-last: C at the end
    r = plan(jax_plan, {"op": "max_pool", "kernel_size": 2}, "reshape", (1, 2, 4, 2, 6))
    assert (r.shape, r.axes) == ((1, 2, 2, 2, 1, 2, 3, 2), (3, 5, 7))


PATCHES = [(torch_plan, "unfold"), (tf_plan, "patches"), (jax_plan, "patches")]


@pytest.mark.parametrize("planner, variant", PATCHES, ids=[p.__name__.split(".")[-1] for p, _ in PATCHES])
def test_patch_extraction_refuses_what_zero_padding_or_ceil_mode_would_change(planner, variant):
    shape = (2, 3, 7, 7)
    assert not isinstance(plan(planner, {"op": "max_pool", "kernel_size": 3, "stride": 2, "dilation": 2}, variant, shape),
                          Unsupported)
    # a mean over zero padding is avg pooling with count_include_pad=True
    assert not isinstance(plan(planner, {"op": "avg_pool", "kernel_size": 3, "stride": 2, "padding": "SAME"}, variant, shape),
                          Unsupported)
    refused = {"zeros": {"op": "max_pool", "kernel_size": 3, "stride": 2, "padding": "SAME"},
               "count_include_pad": {"op": "avg_pool", "kernel_size": 3, "padding": 1, "count_include_pad": False},
               "ceil_mode": {"op": "max_pool", "kernel_size": 2, "ceil_mode": True},
               "fixed window": GLOBAL_MAX}
    for why, spec in refused.items():
        planned = plan(planner, spec, variant, shape)
        assert isinstance(planned, Unsupported) and why in planned.reason, (spec, planned)


def test_each_patch_function_says_what_it_cannot_take():
    avg = {"op": "avg_pool", "kernel_size": 2, "stride": 1, "padding": ((1, 0), (0, 1))}
    assert "2-D" in plan(torch_plan, {"op": "max_pool", "kernel_size": 2}, "unfold", (1, 1, 4)).reason
    assert "asymmetric" in plan(torch_plan, avg, "unfold", (1, 1, 5, 5)).reason
    assert "2-D" in plan(tf_plan, {"op": "max_pool", "kernel_size": 2}, "patches", (1, 1, 4, 4, 4)).reason
    assert "neither 'SAME' nor 'VALID'" in plan(tf_plan, avg, "patches", (1, 1, 5, 5)).reason
    # JAX's patches take any rank and explicit pairs
    r = plan(jax_plan, avg, "patches", (1, 1, 5, 5))
    assert (r.window.pads, r.shape, r.axes) == (((1, 0), (0, 1)), (1, 1, 4, 5, 5), (2,))
    assert plan(jax_plan, {"op": "max_pool", "kernel_size": 2}, "patches", (1, 2, 4, 4, 6)).shape == (1, 2, 8, 2, 2, 3)
    tf_call = plan(tf_plan, {"op": "max_pool", "kernel_size": 2, "stride": 1, "dilation": 2}, "patches", (2, 3, 5, 6))
    assert (tf_call.padding, tf_call.dilation, tf_call.shape) == ("VALID", (2, 2), (2, 3, 4, 4, 3))


def test_the_records_register_the_idioms_with_their_index_layout_and_keras_worker():
    torch_record = registry.get("torch")
    # max(dim)'s indices are flat positions in the plane, judged as return_indices' are
    assert torch_record.index_layouts["max_dim"] == torch_record.index_layouts["return_indices"] == "plane"
    for framework in ("torch", "tensorflow", "jax"):
        record = registry.get(framework)
        for variant in ("keras_global", "keras_global_cf"):
            assert variant in record.variants and record.worker(variant) == record.worker("keras")
