"""poolgrad/reference/properties.py: the case properties findings select on, one worked case each, and
the SPEC.md table that names them."""

import collections
from pathlib import Path

import numpy as np
import pytest

from poolgrad.cases import catalogue
from poolgrad.reference import PoolSpec
from poolgrad.reference.properties import PROPERTIES, case_properties, properties_of_cases

NAN, INF = np.nan, np.inf
K2 = {"op": "max_pool1d", "kernel_size": 2, "stride": 2}
K3P1 = {"op": "max_pool1d", "kernel_size": 3, "stride": 2, "padding": 1}


def props(spec, values, dtype="float32"):
    return case_properties(PoolSpec.from_dict({**spec, "dtype": dtype}), np.array(values, dtype=dtype))


@pytest.mark.parametrize("spec, values, present, absent", [
    (K2, [[[1, NAN, 2, 3]]], {"nan", "nan_with_number"}, {"nan_several", "nan_only", "ties"}),
    (K2, [[[NAN, NAN, 2, 3]]], {"nan", "nan_several", "nan_only", "no_finite_window"}, {"nan_with_number"}),
    (K2, [[[2, 2, 1, 3]]], {"ties", "ties_if_flushed"}, {"signed_zero_tie", "nan"}),
    (K2, [[[-0.0, 0.0, 1, 3]]], {"ties", "signed_zero_tie", "zero_window"}, {"negative_zero_max"}),
    (K2, [[[-0.0, -1, -0.0, -0.0]]], {"negative_zero_max", "ties"}, {"signed_zero_tie"}),
    (K2, [[[INF, 1, 2, 3]]], {"infinite_max", "infinity"}, {"ties"}),
    (K2, [[[0, -INF, 2, 3]]], {"infinity"}, {"infinite_max", "neginf_window", "no_finite_window"}),
    (K2, [[[0, 1, 2, 3]]], set(), {"infinity", "infinite_max"}),
    (K2, [[[1e-40, 2e-40, 1, 3]]], {"subnormal", "ties_if_flushed"}, {"ties"}),
    (K3P1, [[[-INF, -INF, 1, 2, 3]]], {"neginf_window", "neginf_window_at_padding", "neginf_window_after_padding",
                                        "padding", "padding_could_win"}, {"explicit_padding"}),
    (K3P1, [[[1, 2, 3, -INF, -INF]]], {"neginf_window_at_padding"},
     {"neginf_window_after_padding", "no_finite_window_after_padding"}),
    (K3P1, [[[NAN, -INF, 1, 2, 3]]], {"no_finite_window", "no_finite_window_after_padding"},
     {"neginf_window_after_padding", "neginf_window"}),
    ({**K3P1, "padding": [[0, 2]]}, [[[1, 2, 3, 4, 5]]], {"explicit_padding", "padding"}, {"padding_could_win"}),
    # SAME on 6 with k3 s2 adds (0, 1): asymmetric; with k3 s1, (1, 1); the same pairs written out are SAME's too
    ({"op": "max_pool1d", "kernel_size": 3, "stride": 2, "padding": "SAME"}, np.ones((1, 1, 6)),
     {"same_asymmetric", "same_rule", "asymmetric_padding"}, {"explicit_padding", "kernel_over_input"}),
    ({"op": "max_pool1d", "kernel_size": 3, "stride": 2, "padding": [[0, 1]]}, np.ones((1, 1, 6)), {"same_asymmetric"},
     {"explicit_padding", "same_rule"}),
    ({"op": "max_pool1d", "kernel_size": 3, "stride": 1, "padding": "SAME"}, np.ones((1, 1, 6)), set(),
     {"same_asymmetric", "asymmetric_padding"}),
    # a 3-tap window over a 1-element depth fits only with SAME's (1, 1)
    ({"op": "avg_pool3d", "kernel_size": 3, "stride": 4, "padding": "SAME"}, np.ones((1, 1, 1, 4, 3)),
     {"kernel_over_input"}, {"same_asymmetric"}),
    ({**K2, "ceil_mode": True}, [[[1, 2, 3]]], {"ceil_overhang", "non_overlapping"}, {"padding", "ceil_window_dropped"}),
    # ceil_mode's third window of k1 s2 over 4 would start at 4, past the input: the rule drops it
    ({"op": "max_pool1d", "kernel_size": 1, "stride": 2, "ceil_mode": True}, [[[1, 2, 3, 4]]], {"ceil_window_dropped"},
     {"ceil_overhang"}),
    ({"op": "max_pool1d", "kernel_size": 1, "stride": 2, "ceil_mode": True}, [[[1, 2, 3, 4, 5]]], set(),
     {"ceil_window_dropped"}),
    # k2 s3 p1 over 4: windows at -1, 2 and (ceil) 5, which starts past input + left pad
    ({"op": "max_pool1d", "kernel_size": 2, "stride": 3, "padding": 1, "ceil_mode": True}, [[[1, 2, 3, 4]]],
     {"ceil_window_dropped", "padding"}, {"asymmetric_padding"}),
    ({"op": "max_pool1d", "kernel_size": 2, "stride": 3, "padding": 1}, [[[1, 2, 3, 4]]], set(), {"ceil_window_dropped"}),
    ({"op": "avg_pool1d", "kernel_size": 3, "stride": 1, "padding": [[1, 2]]}, [[[1, 2, 3, 4]]], {"asymmetric_padding"},
     {"same_asymmetric"}),
    ({**K2, "kernel_size": 2, "stride": 1, "dilation": 2}, [[[1, 2, 3]]], {"dilation"}, {"non_overlapping"}),
    ({"op": "max_pool3d", "kernel_size": 3, "stride": 1}, np.ones((1, 1, 3, 3, 3)), {"taps_over_25"}, set()),
    ({"op": "adaptive_max_pool1d", "output_size": 3}, [[[1, 2, 3, 4, 5]]], {"uneven_bins"}, {"non_overlapping"}),
    ({"op": "adaptive_max_pool1d", "output_size": 2}, [[[1, 2, 3, 4]]], {"non_overlapping"}, {"uneven_bins"}),
    ({"op": "adaptive_max_pool1d", "output_size": 2}, [[[1, 2, 3, 4]]], set(), {"adaptive_unit_axis", "adaptive_unit_last_axis"}),
    ({"op": "adaptive_max_pool2d", "output_size": [1, 2]}, np.ones((1, 1, 3, 4)), {"adaptive_unit_axis"}, {"adaptive_unit_last_axis"}),
    ({"op": "adaptive_max_pool2d", "output_size": [3, 2]}, np.ones((1, 1, 3, 1)), {"adaptive_unit_axis", "adaptive_unit_last_axis"}, set()),
    ({"op": "max_pool2d", "kernel_size": 1}, np.ones((1, 1, 1, 1)), set(), {"adaptive_unit_axis", "adaptive_unit_last_axis"}),
    ({"op": "lp_pool1d", "kernel_size": 2, "norm_type": 3}, [[[40, 40, 1, 1]]], set(),
     {"power_sum_overflows", "norm_type_one", "power_overflows"}),
    ({"op": "lp_pool1d", "kernel_size": 2, "norm_type": 1}, [[[1, NAN, 1, 1]]], {"norm_type_one", "nan"}, set()),
    ({"op": "lp_pool1d", "kernel_size": 2, "norm_type": 1}, [[[-1.5, 1.5, 1, 2]]], {"zero_power_sum"}, {"zero_window"}),
    ({"op": "lp_pool1d", "kernel_size": 2, "norm_type": 2}, [[[0, 0, 1, 2]]], {"zero_power_sum", "zero_window"}, set()),
    ({"op": "lp_pool1d", "kernel_size": 2, "norm_type": 2}, [[[-1.5, 1.5, 1, 2]]], set(), {"zero_power_sum"}),
    ({"op": "avg_pool1d", "kernel_size": 2}, [[[-1.5, 1.5, 1, 2]]], set(), {"zero_power_sum"}),
    (K2, [[[NAN, 1, 2, NAN]]], {"number_then_nan", "nan_not_first"}, set()),
    (K2, [[[NAN, NAN, NAN, 3]]], {"nan_not_first"}, {"number_then_nan"}),
    ({"op": "avg_pool1d", "kernel_size": 2}, [[[3e38, 3e38, 1, 1]]], {"window_sum_overflows"}, {"one_tap_windows"}),
    ({"op": "adaptive_max_pool1d", "output_size": 3}, [[[1, 2, 3]]], {"one_tap_windows"}, {"window_sum_overflows"}),
    (K2, np.zeros((0, 1, 4)), {"empty", "non_overlapping"}, {"ties"}),
])
def test_property_holds_exactly_where_the_case_has_it(spec, values, present, absent):
    found = props(spec, values)
    assert present <= found and not (absent & found), sorted(found)


def test_power_sum_overflows_in_the_cases_dtype():
    spec = {"op": "lp_pool1d", "kernel_size": 2, "norm_type": 3}
    assert "power_sum_overflows" in props(spec, [[[40, 40, 1, 1]]], dtype="float16")
    assert "power_sum_overflows" not in props(spec, [[[40, 40, 1, 1]]], dtype="float32")
    assert "power_overflows" not in props(spec, [[[30, 30, 1, 1]]], dtype="float16")  # 27000 each
    assert "power_overflows" in props(spec, [[[41, 1, 1, 1]]], dtype="float16")  # 68921


def test_count_over_precision_in_the_cases_dtype():
    """2048 ones are counted exactly in float16, 2049 are not; padding is not counted."""
    spec = {"op": "adaptive_avg_pool1d", "output_size": 1}
    assert "count_over_precision" in props(spec, np.ones((1, 1, 2049)), dtype="float16")
    assert "count_over_precision" not in props(spec, np.ones((1, 1, 2048)), dtype="float16")
    assert "count_over_precision" not in props(spec, np.ones((1, 1, 2049)), dtype="float32")
    assert "count_over_precision" in props(spec, np.ones((1, 1, 257)), dtype="bfloat16")
    padded = {"op": "avg_pool1d", "kernel_size": 2050, "stride": 1, "padding": 1025}
    assert "count_over_precision" not in props(padded, np.ones((1, 1, 2048)), dtype="float16")


def test_every_property_is_in_the_spec():
    spec = (Path(__file__).parents[2] / "SPEC.md").read_text()
    for name, meaning in PROPERTIES.items():
        assert f"| `{name}` | {meaning} |" in spec, name


def test_a_calls_cases_stacked_have_each_cases_own_properties():
    """properties_of_cases walks a framework call's cases at once (stacked along N, as they
    run); each case still gets exactly the properties it has alone, empty-batch and
    subnormal cases (ties_if_flushed) included."""
    calls = collections.defaultdict(list)
    for case in catalogue():
        calls[case.spec].append(case)
    for spec, cases in calls.items():
        stacked = properties_of_cases(spec, [c.input for c in cases])
        alone = [case_properties(spec, c.input) for c in cases]
        assert stacked == alone, [c.id for c, s, a in zip(cases, stacked, alone) if s != a]


def test_a_stack_walked_in_several_blocks_of_planes_keeps_each_cases_properties():
    """A stack too large for one block of gathered windows (BLOCK_ELEMENTS) is walked a block
    of planes at a time: a case's properties do not depend on where the blocks split."""
    from poolgrad.reference.properties import BLOCK_ELEMENTS

    spec = PoolSpec.from_dict({"op": "max_pool2d", "kernel_size": 3, "stride": 1, "padding": 1, "dtype": "float32"})
    specials = [NAN, -INF, INF, -0.0, 0.0, 1e-40]
    rng = np.random.default_rng(3)
    planes_per_block = BLOCK_ELEMENTS // (8 * 8 * 9)
    cases = []
    for i in range(3 * planes_per_block // 2):  # cases of 2 planes: some straddle a block's end
        x = rng.integers(-2, 3, size=(2, 1, 8, 8)).astype(np.float32)
        x[i % 2, 0, i % 8, (3 * i) % 8] = specials[i % len(specials)]
        cases.append(x)
    stacked = properties_of_cases(spec, cases)
    assert stacked == [case_properties(spec, x) for x in cases]
    assert len({frozenset(p) for p in stacked}) > 3  # the cases differ, so a misplaced row would show


def test_block_view_over_5_dims_counts_the_dims_a_block_reduction_broadcasts_over():
    """(N, out, k, ..., C) with dims of 1 dropped and alike neighbours merged, N counted as more
    than 1: an output of one on the first axis leaves 7 dims, on the last axis 5."""
    def over(spec, shape):
        return "block_view_over_5_dims" in props(spec, np.ones(shape))
    first, last = {"op": "adaptive_max_pool3d", "output_size": [1, 2, 2]}, {"op": "adaptive_max_pool3d", "output_size": [2, 2, 1]}
    assert over(first, (1, 2, 4, 4, 4)) and not over(last, (1, 2, 4, 4, 4))
    assert over(first, (1, 1, 4, 4, 4)) and not over(last, (1, 1, 4, 4, 4))  # C = 1 drops out: 6 and 4
    assert over({"op": "max_pool3d", "kernel_size": 2, "stride": 2}, (1, 2, 4, 4, 4))
    assert not over({"op": "max_pool3d", "kernel_size": 1, "stride": 1}, (1, 2, 4, 4, 4))   # no block axis
    assert not over({"op": "max_pool3d", "kernel_size": 2, "stride": 1}, (1, 2, 4, 4, 4))   # windows overlap
    assert not over({"op": "max_pool2d", "kernel_size": 2, "stride": 2}, (1, 2, 4, 4))      # at most 5


def test_ties_over_precision_counts_a_windows_tied_maxima_in_the_cases_dtype():
    """257 tied zeros in one window: more than bfloat16 counts (256), fewer than float16 (2048)."""
    spec = {"op": "adaptive_max_pool1d", "output_size": 1}
    tied = np.concatenate([np.zeros(257), -np.ones(10)])[None, None]
    assert "ties_over_precision" in props(spec, tied, dtype="bfloat16")
    assert "ties_over_precision" not in props(spec, tied, dtype="float16")
    assert "ties_over_precision" not in props(spec, tied[..., 1:], dtype="bfloat16")   # 256 ties
