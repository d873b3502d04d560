"""Segment pooling's compiled variants, in process: what each compiles is the eager variant's call,
and a torch.compile bundle of segment members lays each member's (items, features) data out as its
call of its own does."""

import numpy as np
import pytest

from poolgrad.adapters.base import OK
from poolgrad.reference import PoolSpec

SPECS = [PoolSpec.from_dict({"op": "segment_max_pool", "segment_ids": [0, 0, 2, 2, 2], "num_segments": 4}),
         PoolSpec.from_dict({"op": "segment_avg_pool", "segment_ids": [1, 0, 1], "num_segments": 2})]


def _inputs(seed):
    """Tie-free (N, C, L) inputs of the specs and upstream gradients of their (N, C, num_segments) outputs."""
    rng = np.random.default_rng(seed)
    xs = [rng.permutation(2 * 3 * len(s.segment_ids)).reshape(2, 3, -1).astype(np.float32) / 8 for s in SPECS]
    return xs, [rng.standard_normal((2, 3, s.num_segments)).astype(np.float32) for s in SPECS]


def test_a_scatter_reduce_compile_bundle_gives_each_member_eagers_bits():
    """The members' forward and gradient are scatter_reduce's eager ones, bit for bit, in planes
    of the case's shape: inductor runs aten's scatter_reduce for amax and mean and lowers the
    traced backward formula (torch findings: torch-scatter-reduce-amax-*)."""
    pytest.importorskip("torch")
    from poolgrad.adapters.torch.adapter import ADAPTER
    xs, gs = _inputs(1)
    bundled = ADAPTER.run_bundle(SPECS, "scatter_reduce_compile", "cpu", xs, gs)
    for spec, x, g, b in zip(SPECS, xs, gs, bundled):
        eager = ADAPTER.run(spec, "scatter_reduce", "cpu", x, g)
        assert b.status == eager.status == OK, b.message
        assert b.forward.shape == g.shape and b.grad_input.shape == x.shape
        assert b.forward.tobytes() == eager.forward.tobytes()
        assert b.grad_input.tobytes() == eager.grad_input.tobytes()
        assert b.info["compiles"] > 0
