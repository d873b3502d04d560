"""Which (case, target) pairs each AD mode checks (suite.ad_modes.selected)."""

import numpy as np
import pytest

from poolgrad.adapters.base import Target
from poolgrad.cases import make_case
from poolgrad.reference import PoolSpec
from poolgrad.suite.ad_modes import selected


def _case(op, family, dtype="float32"):
    spec = PoolSpec.from_dict({"op": op, "kernel_size": 2, "dtype": dtype})
    return make_case(f"{op}-{family}-{dtype}", family, spec, np.arange(4.0).reshape(1, 1, 4))


CASES = [_case("max_pool", "nan"), _case("max_pool", "random"), _case("avg_pool", "nan"),
         _case("max_pool", "nan", "float16")]
TARGETS = [Target("torch", "eager", "cpu"), Target("torch", "compile", "cpu"), Target("torch", "module", "cpu"),
           Target("jax", "jit", "cpu")]


def ids(pairs):
    return {(c.id, t.id) for c, t in pairs}


def test_default_checks_max_type_float32_value_families_on_eager_and_one_compiled_path():
    assert ids(selected(CASES, TARGETS, "default", "jvp")) == {
        ("max_pool-nan-float32", "torch-eager-cpu"), ("max_pool-nan-float32", "torch-compile-cpu"),
        ("max_pool-nan-float32", "jax-jit-cpu")}


def test_default_leaves_torch_compile_double_backward_to_all():
    # AOTAutograd refuses double backward: in the default it would only compile to be refused.
    assert ids(selected(CASES, TARGETS, "default", "double_backward")) == {
        ("max_pool-nan-float32", "torch-eager-cpu"), ("max_pool-nan-float32", "jax-jit-cpu")}
    assert ("max_pool-nan-float32", "torch-compile-cpu") in ids(selected(CASES, TARGETS, "all", "double_backward"))


def test_all_and_none():
    assert len(selected(CASES, TARGETS, "all", "jvp")) == len(CASES) * len(TARGETS)
    assert selected(CASES, TARGETS, "none", "jvp") == []


def test_an_unknown_mode_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="unknown AD mode 'hvp'; known: jvp, double_backward"):
        selected(CASES, TARGETS, "default", "hvp")
