"""Building cases and fabricated outcomes for the verdict tests."""

import numpy as np

from poolgrad import reference, verdicts
from poolgrad.adapters.base import OK, Outcome
from poolgrad.reference import PoolSpec
from poolgrad.verdicts import sums
from poolgrad.verdicts.case import CaseReference
from poolgrad.verdicts.observed import Observed


def case(spec_dict, row, dtype="float32"):
    """A case on one row (shape (1, 1, len)) or a 2-D grid, with a power-of-two probe."""
    spec = PoolSpec.from_dict({**spec_dict, "dtype": dtype})
    x = np.asarray(row, dtype=np.float64)
    x = x.reshape((1, 1) + x.shape).astype(reference.DTYPES[dtype])
    shape = reference.output_shape(spec, x.shape)
    g = (2.0 ** np.arange(int(np.prod(shape)))).reshape(shape).astype(x.dtype)
    return spec, x, g


def outcome(spec, x, forward, grad_input):
    shape = reference.output_shape(spec, x.shape)
    return Outcome(OK, np.asarray(forward, dtype=np.float64).reshape(shape).astype(x.dtype),
                   np.asarray(grad_input, dtype=np.float64).reshape(x.shape).astype(x.dtype))


def under(spec, x, g, **policy):
    """The outcome of a framework that follows a reference policy."""
    return Outcome(OK, reference.forward(spec, x, **policy), reference.backward(spec, x, g, **policy))


def classify(spec, x, g, outcome, repeats=(), index_layout=None):
    """The verdict engine's verdict on ``outcome`` for the case (spec, x, g)."""
    return verdicts.classify(Observed(CaseReference(spec, x, g), outcome), repeats, index_layout=index_layout)


def routes_as(case: CaseReference, policy, grad_input) -> bool:
    """Whether ``grad_input`` routes as ``policy`` on ``case`` (verdicts.sums.routes_as)."""
    return sums.routes_as(Observed(case, Outcome(OK, case.expected_forward, grad_input)), policy)
