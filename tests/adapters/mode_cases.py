"""The tiny case the adapters' AD-mode tests share: ties, two NaNs and a -inf window, where a
JVP or double-backward rule's selection shows (one channel, so NWC = NCW)."""

import numpy as np

from poolgrad.reference import PoolSpec

SPEC = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, "stride": 1, "dtype": "float32"})
X = np.array([[[1, 3, 3, np.nan, np.nan, 0, -np.inf, -np.inf]]], dtype=np.float32)
G = (2.0 ** np.arange(7, dtype=np.float32)).reshape(1, 1, 7)       # grad_output
T = (2.0 ** np.arange(8, dtype=np.float32)).reshape(1, 1, 8) * 3   # tangent / v
