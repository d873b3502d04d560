"""poolgrad's NumPy reference: the executable form of SPEC.md.

    from poolgrad.reference import PoolSpec, forward, backward
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2})
    dx = backward(spec, x, dy, tie="first", nan="propagate")
    dy_t = jvp(spec, x, tangent)                      # forward mode, same policies
    by_g, by_x = double_backward(spec, x, dy, v)      # d/d(dy), d/dx of sum(dx * v)
"""

from .ad_modes import double_backward, jvp
from .api import backward, error_scale, forward
from .dtypes import DTYPES
from .errors import SpecError
from .geometry import Geometry, output_shape, resolve
from .policies import CANONICAL, NANS, TIES
from .spec import OPS, PoolSpec

__all__ = ["PoolSpec", "SpecError", "forward", "backward", "error_scale", "jvp", "double_backward", "resolve", "output_shape", "Geometry",
           "OPS", "TIES", "NANS", "CANONICAL", "DTYPES"]
