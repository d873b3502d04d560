"""plan_for: the policy search's shared window plans are the plans of their geometry, and read-only."""

import numpy as np
import pytest

from poolgrad.reference import PoolSpec, SpecError, resolve
from poolgrad.reference.taps import TapPlan, plan_for

SPEC = PoolSpec.from_dict({"op": "max_pool2d", "kernel_size": 3, "stride": 2, "padding": 1})


def test_one_plan_per_spec_and_spatial_shape():
    plan = plan_for(SPEC, (2, 3, 7, 5))
    assert plan_for(SPEC, (4, 1, 7, 5)) is plan            # N and C do not change the windows
    assert plan_for(SPEC, (2, 3, 7, 6)) is not plan
    fresh = TapPlan(resolve(SPEC, (2, 3, 7, 5)))
    assert [(i, None if v is None else v.tolist()) for i, v in fresh.taps] == \
        [(i, None if v is None else v.tolist()) for i, v in plan.taps]
    tap = np.zeros((2, 3) + plan.geom.out_shape, dtype=np.intp)
    padded = plan.pad(np.zeros((2, 3, 7, 5))).shape
    assert (plan.flat_index(tap, padded) == fresh.flat_index(tap, padded)).all()


def test_shared_plans_refuse_writes():
    plan = plan_for(SPEC, (1, 1, 7, 5))
    with pytest.raises(ValueError):
        plan.geom.axes[0].positions[0, 0] = 5
    with pytest.raises(ValueError):
        next(v for _, v in plan.taps if v is not None)[...] = False


def test_a_bad_shape_is_refused_naming_it():
    with pytest.raises(SpecError, match=r"\(3, 7\)"):
        plan_for(SPEC, (3, 7))
