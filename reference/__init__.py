"""poolgrad's NumPy reference: the executable form of SPEC.md.

    from reference import PoolSpec, forward, backward
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2})
    dx = backward(spec, x, dy, tie="first", nan="propagate")
"""

from .api import backward, forward
from .dtypes import DTYPES
from .errors import SpecError
from .geometry import Geometry, output_shape, resolve
from .policies import CANONICAL, NANS, TIES
from .spec import OPS, PoolSpec

__all__ = ["PoolSpec", "SpecError", "forward", "backward", "resolve", "output_shape", "Geometry",
           "OPS", "TIES", "NANS", "CANONICAL", "DTYPES"]
