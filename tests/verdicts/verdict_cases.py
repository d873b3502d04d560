"""Building cases and fabricated outcomes for the verdict tests."""

import numpy as np

from poolgrad import reference
from poolgrad.adapters.base import OK, Outcome
from poolgrad.reference import PoolSpec


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
