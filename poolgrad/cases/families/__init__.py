"""Case generators, one module per kind of input. A generator takes a :class:`Context` and
returns the input in a *source* dtype (float64, or float32 where the family is about rounding
from float32); the catalogue rounds it to the case's dtype. It returns None where its
property cannot be placed in that geometry (e.g. a 3-way tie in a 2-tap window), and the
catalogue leaves that case out. A generator about the upstream gradient returns
``(input, grad_output)``; the others leave grad_output to the routing probe."""

from __future__ import annotations

import importlib

import numpy as np

from .base import Context


def generate(generator: str, ctx: Context) -> np.ndarray | tuple | None:
    """Run the generator named ``module.function`` (a module of this package)."""
    module, _, function = generator.partition(".")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)(ctx)


__all__ = ["Context", "generate"]
