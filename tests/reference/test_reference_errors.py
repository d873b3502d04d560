"""Bad input raises SpecError (a ValueError) naming the field and what is allowed; geometry
that only some framework forbids is valid in the reference."""

from __future__ import annotations

import numpy as np
import pytest

from poolgrad.reference import PoolSpec, SpecError, backward, forward

X2 = np.zeros((1, 1, 4, 4))
MAX2 = {"op": "max_pool", "kernel_size": 2}


@pytest.mark.parametrize("spec_dict, field, allowed", [
    ({"op": "median_pool", "kernel_size": 2}, "op", "max_pool"),
    ({**MAX2, "dtype": "int8"}, "dtype", "float16"),
    ({**MAX2, "stride": 0}, "stride", "positive"),
    ({**MAX2, "stride": -1}, "stride", "positive"),
    ({**MAX2, "dilation": 0}, "dilation", "positive"),
    ({**MAX2, "padding": -1}, "padding", ">= 0"),
    ({**MAX2, "padding": [[1, -1], [0, 0]]}, "padding", ">= 0"),
    ({**MAX2, "padding": "FULL"}, "padding", "SAME"),
    ({**MAX2, "norm_type": 2}, "norm_type", "kernel_size"),
    ({**MAX2, "count_include_pad": False}, "count_include_pad", "kernel_size"),
    ({"op": "adaptive_avg_pool", "output_size": 2, "kernel_size": 2}, "kernel_size", "output_size"),
    ({"op": "avg_pool", "kernel_size": 2, "output_size": 2}, "output_size", "divisor_override"),
    ({"op": "lp_pool", "kernel_size": 2, "norm_type": 0}, "norm_type", "positive"),
    ({"op": "adaptive_max_pool", "output_size": 0}, "output_size", "positive"),
    ({"op": "max_pool"}, "kernel_size", "positive"),
    ({**MAX2, "colour": "red"}, "colour", "allowed keys"),
    ({"op": "segment_max_pool", "segment_ids": [0, 1]}, "num_segments", "positive integer"),
    ({"op": "segment_avg_pool", "num_segments": 2}, "segment_ids", "one id per item"),
    ({"op": "segment_max_pool", "num_segments": 0, "segment_ids": [0]}, "num_segments", "positive"),
    ({"op": "segment_max_pool", "num_segments": 2, "segment_ids": [0, 2]}, "segment_ids", "raise num_segments"),
    ({"op": "segment_max_pool", "num_segments": 2, "segment_ids": [0, -1]}, "segment_ids", "0 <= id"),
    ({"op": "segment_max_pool", "num_segments": 2, "segment_ids": [0, 0.5]}, "segment_ids", "integers"),
    ({"op": "segment_max_pool", "num_segments": 2, "segment_ids": []}, "segment_ids", "non-empty"),
    ({"op": "segment_max_pool2d", "num_segments": 2, "segment_ids": [0, 1]}, "rank", "segment_max_pool1d"),
    ({"op": "segment_max_pool", "num_segments": 2, "segment_ids": [0, 1], "kernel_size": 2}, "kernel_size",
     "segment_ids"),
])
def test_bad_spec_names_its_field(spec_dict, field, allowed):
    with pytest.raises(SpecError) as err:
        PoolSpec.from_dict(spec_dict)
    assert isinstance(err.value, ValueError)
    assert err.value.field == field
    assert str(err.value).startswith(field) and allowed in str(err.value)


@pytest.mark.parametrize("spec_dict, x, field, allowed", [
    ({"op": "max_pool", "kernel_size": 5}, X2, "kernel_size", "larger than the padded input"),
    ({"op": "max_pool", "kernel_size": 3, "dilation": 2}, X2, "kernel_size", "larger than the padded input"),
    ({"op": "adaptive_avg_pool", "output_size": [2, 2]}, np.zeros((1, 1, 4)), "output_size", "spatial dims"),
    ({"op": "max_pool", "kernel_size": [2, 2, 2]}, X2, "kernel_size", "spatial dims"),
    (MAX2, np.zeros((4, 4)), "input", "(N, C, *spatial)"),
    (MAX2, np.zeros((1, 1, 2, 2, 2, 2)), "input", "(N, C, *spatial)"),
    (MAX2, np.zeros((1, 1, 0, 4)), "input", "non-empty"),
    (MAX2, np.zeros((1, 1, 4, 4), dtype=np.int32), "input", "float16"),
    ({"op": "max_pool2d", "kernel_size": 2}, np.zeros((1, 1, 4)), "input", "2 spatial dims"),
    ({**MAX2, "dtype": "float32"}, X2, "dtype", "float64"),
])
def test_bad_spec_for_this_input_names_its_field(spec_dict, x, field, allowed):
    with pytest.raises(SpecError) as err:
        forward(PoolSpec.from_dict(spec_dict), x)
    assert err.value.field == field
    assert allowed in str(err.value)


@pytest.mark.parametrize("g_shape", [(1, 1, 2), (1, 1, 3, 3), (2, 1, 2, 2)])
def test_grad_output_must_have_the_forward_shape(g_shape):
    with pytest.raises(SpecError) as err:
        backward(PoolSpec.from_dict(MAX2), X2, np.zeros(g_shape))
    assert err.value.field == "grad_output" and "(1, 1, 2, 2)" in str(err.value)


@pytest.mark.parametrize("policy, field", [({"tie": "random"}, "tie"), ({"nan": "drop"}, "nan")])
def test_unknown_policy_names_its_field(policy, field):
    with pytest.raises(SpecError) as err:
        backward(PoolSpec.from_dict(MAX2), X2, np.zeros((1, 1, 2, 2)), **policy)
    assert err.value.field == field and "allowed" in str(err.value)


def test_framework_forbidden_geometry_is_valid_here():
    """Padding wider than half the kernel (PyTorch refuses it) and a window wholly in padding
    are well defined: that window's max is -inf and it routes nothing."""
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, "padding": [[0, 3]]})
    x = np.array([[[5.0]]])
    assert forward(spec, x).tolist() == [[[5.0, -np.inf]]]
    assert backward(spec, x, np.array([[[1.0, 7.0]]])).tolist() == [[[1.0]]]


@pytest.mark.parametrize("shape, problem", [((1, 1, 3), "has 2 ids but the input has 3 items"),
                                            ((1, 1, 2, 2), "one axis of items")])
def test_segment_ids_must_fit_the_input(shape, problem):
    s = PoolSpec.from_dict({"op": "segment_max_pool", "num_segments": 2, "segment_ids": [1, 0]})
    with pytest.raises(SpecError) as err:
        forward(s, np.zeros(shape))
    assert problem in str(err.value)
