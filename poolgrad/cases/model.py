"""The case: a pooling spec plus concrete arrays, and the routing probe used as its default
upstream gradient."""

from __future__ import annotations

import dataclasses
import functools
import json
import re

import numpy as np

from poolgrad.reference import PoolSpec, resolve
from poolgrad.reference.dtypes import dtype_from_name
from poolgrad.reference.probes import routing_probe
from poolgrad.reference import roi_pool
from poolgrad.reference.taps import plan_for

from .windows import without_dtype



@dataclasses.dataclass(frozen=True, eq=False)
class Case:
    """One conformance case. ``spec`` has ``dtype`` and ``rank`` set; ``input`` has shape
    ``(N, C, *spatial)`` and ``grad_output`` the forward output's shape, both in the spec's
    dtype and read-only (the catalogue is shared by every test of a run).

    Compared by identity (``eq=False``): arrays have no single truth value.
    """

    id: str
    family: str
    spec: PoolSpec
    input: np.ndarray
    grad_output: np.ndarray

    @property
    def group_key(self) -> tuple:
        """Cases with equal keys run as one framework call, stacked along N: the same spec
        (dtype included), channel count and spatial shape. Empty-batch cases keep a call of
        their own, so the framework meets the empty tensor itself, and so do RoI cases: their
        output's first dim is the boxes', each naming its image by index, so a stack would have to
        renumber every case's boxes and split the outputs by box, not by plane."""
        alone = self.input.shape[0] == 0 or (self.id if self.spec.is_roi else False)
        return json.dumps(self.spec.to_dict(), sort_keys=True), self.input.shape[1:], alone


_DRAW = re.compile(r"(?P<stem>.+)~[1-9][0-9]*")


def with_draws(cases) -> list[tuple[Case, tuple[Case, ...]]]:
    """Each case that is no draw of another, with its draws, in the cases' order. A draw of the
    case ``<id>`` is a case ``<id>~<k>`` (k = 1, 2, ...) of its family and batching group:
    other values of the same case (the catalogue's ``build(..., draw=k)``). A case and its draws
    are one test per target, each draw checked and recorded on its own, so more draws add
    checks and records, not test items (pytest's own cost per item is about a check's)."""
    by_id = {c.id: c for c in cases}

    def owner(case):
        m = _DRAW.fullmatch(case.id)
        o = by_id.get(m["stem"]) if m else None
        return o if o is not None and o.family == case.family and o.group_key == case.group_key else None

    draws: dict[str, list] = {}
    tests = []
    for c in cases:
        o = owner(c)
        if o is not None and owner(o) is None:  # a draw of a draw is a case of its own
            draws.setdefault(o.id, []).append(c)
        else:
            tests.append(c)
    return [(c, tuple(draws.get(c.id, ()))) for c in tests]


def make_case(id: str, family: str, spec: PoolSpec, input: np.ndarray, grad_output=None) -> Case:
    """A Case with arrays rounded to the spec's dtype, frozen read-only; ``grad_output``
    defaults to :func:`default_grad_output`."""
    dtype = dtype_from_name(spec.dtype)
    x = np.array(input, dtype=dtype)
    g = default_grad_output(spec, x.shape) if grad_output is None else np.array(grad_output, dtype=dtype)
    x.flags.writeable = False
    g.flags.writeable = False
    return Case(id, family, spec, x, g)


@functools.lru_cache(maxsize=512)
def _out_shape_and_fan_in(spec: PoolSpec, spatial_shape: tuple[int, ...]) -> tuple[tuple, int]:
    """The output's spatial shape and the most windows that read one input element
    (windows are separable, so the product of the per-axis counts; overlapping adaptive
    bins can exceed the bin volume)."""
    geom = resolve(spec, (1, 1, *spatial_shape))
    fan_in = 1
    for axis in geom.axes:
        fan_in *= int(np.bincount(axis.positions[axis.in_input], minlength=axis.length).max())
    return geom.out_shape, fan_in


def default_grad_output(spec: PoolSpec, input_shape) -> np.ndarray:
    """The routing probe over the forward output of ``spec`` on an input of ``input_shape``."""
    if spec.is_roi:
        plan = plan_for(spec, tuple(input_shape))
        return routing_probe(plan.out_shape(), spec.dtype, roi_pool.fan_in(plan))
    out_spatial, fan_in = _out_shape_and_fan_in(without_dtype(spec), tuple(input_shape[2:]))
    return routing_probe(tuple(input_shape[:2]) + out_spatial, spec.dtype, fan_in)
