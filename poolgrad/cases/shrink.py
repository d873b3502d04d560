"""The smallest input that shows a finding, by poolgrad's reference alone: what the reference
expects on a case, what the finding's claim says the framework returns there, and the boxes of
its example's planes that still show it (an upstream draft's reproducer runs on them)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from poolgrad import reference
from poolgrad.adapters import registry
from poolgrad.adapters.base import Target, Unsupported
from poolgrad.knowledge.finding import Finding
from poolgrad.reference.probes import routing_probe
from poolgrad.reference.properties import properties_of_cases
from poolgrad.verdicts import Policy
from poolgrad.verdicts.ad_modes import direction
from poolgrad.verdicts.compare import identical

SMALL = 16  # elements of an input that reads at a glance
MAX_BOXES = 1000  # boxes of a plane tried, smallest first (a 4x4x4 plane has 1,000, a 5x5x5 one 3,375)
VERIFIED = 4  # inputs a draft's reproducer is run on, smallest first, until one shows the behaviour


def expected(spec, x, g, mode: str) -> dict[str, np.ndarray]:
    """poolgrad's NumPy reference on the case, by what the reproducer checks."""
    if mode == "jvp":
        return {"tangent": reference.jvp(spec, x, direction(spec, x))}
    return {"output": reference.forward(spec, x), "gradient": reference.backward(spec, x, g)}


def claimed(f: Finding, spec, x, g, mode: str) -> dict[str, np.ndarray] | None:
    """What the finding says the framework returns on the case (its claim run through the
    reference), for the sides it changes; None for a claim that names no values (an error, a
    crash, a result that follows no rule)."""
    in_mode = f.in_mode(mode)
    if in_mode is None or not in_mode.claims_policy:
        return None
    if mode == "jvp":
        return {"tangent": Policy(**in_mode.forward).jvp(spec, x, direction(spec, x))} if in_mode.forward else {}
    out = {}
    if in_mode.forward:
        out["output"] = Policy(**in_mode.forward).evaluate(spec, x, g).forward
    if in_mode.gradient:
        out["gradient"] = Policy(**in_mode.gradient).evaluate(spec, x, g).grad_input
    return out


def shows(f: Finding, spec, x, g, mode: str, props: frozenset[str] | None = None, by_values: bool = True) -> bool:
    """Whether the case shows the finding: in its scope and, for a claim of values (``by_values``),
    with values the reference says differ from the expected ones (``props``: the case's, where
    known)."""
    props = properties_of_cases(spec, [x])[0] if props is None else props
    if not f.in_scope(f"{spec.op}{x.ndim - 2}d", spec.dtype, props, call_elements=x.size, call_properties=lambda: props):
        return False
    claim = claimed(f, spec, x, g, mode) if by_values else None
    if claim is None:
        return True
    want = expected(spec, x, g, mode)
    return any(not identical(got, want[side]) for side, got in claim.items())


def shrinks(f: Finding, case, target: Target, mode: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Inputs and upstream gradients that may show the finding, smallest first, the example's
    own last: boxes of the first (n, c) plane that shows it, that plane, then the example
    (windows never span planes). A finding about the size of the call (``min_call_elements``)
    gets each of them repeated over the batch up to that size. A claim of values is checked on
    each box by the reference; a claim that names none (an error, a result by no rule, values
    the example's own do not differ from) only by its scope, boxes of the plane's own case
    properties first, and only where the plane is too large to read (more than SMALL elements).
    The reference cannot tell whether a kernel shows it on a box of another kind or on a plane
    without the call's other cases (``when_call``): a draft checks them by running them."""
    x, g = case.input, case.grad_output
    if x.size == 0:
        return [(x, g)]
    spec = case.spec
    if spec.is_roi:  # boxes name the images and pixels they pool: only a channel of the case is the same case
        return [(x[:, c:c + 1], g[:, c:c + 1]) for c in range(x.shape[1])
                if shows(f, spec, x[:, c:c + 1], g[:, c:c + 1], mode)][:1] + [(x, g)]

    def grown(xs, gs):  # the kernel is chosen by the call's size: the batch repeated up to it
        n = -(-f.min_call_elements // xs.size) if f.min_call_elements else 1
        return np.tile(xs, (n,) + (1,) * (xs.ndim - 1)), np.tile(gs, (n,) + (1,) * (gs.ndim - 1))

    by_values = claimed(f, spec, x, g, mode) is not None and shows(f, spec, x, g, mode)
    plane = next(((x[n:n + 1, c:c + 1], g[n:n + 1, c:c + 1])
                  for n, c in itertools.product(range(x.shape[0]), range(x.shape[1]))
                  if shows(f, spec, *grown(x[n:n + 1, c:c + 1], g[n:n + 1, c:c + 1]), mode, by_values=by_values)), None)
    if plane is None:
        return [(x, g)]
    example, (x, g) = (x, g), plane
    if spec.regions is not None or not (by_values or x.size > SMALL):
        return [grown(*plane), example]  # regions are the input's: a box of it is another case
    props = properties_of_cases(spec, [x])[0]
    boxes = []  # (box input, its geometry), smallest first
    for box in sorted(_boxes(x.shape[2:]), key=lambda b: (math.prod(s.stop - s.start for s in b), b))[:MAX_BOXES]:
        xs = x[(..., *box)]
        try:
            out = reference.resolve(spec, xs.shape)
        except reference.SpecError:
            continue
        if not isinstance(registry.plan(target, spec, xs.shape), Unsupported):
            boxes.append((xs, out))
    candidates = []  # (box input, its gradient, how far it is from the plane's kind)
    # The boxes' case properties at once: boxes of one shape are walked together.
    for (xs, out), box_props in zip(boxes, properties_of_cases(spec, [xs for xs, _ in boxes])):
        gs = (np.full((1, 1, *out.out_shape), g.flat[0], dtype=g.dtype) if np.all(g == g.flat[0])
              else routing_probe((1, 1, *out.out_shape), spec.dtype, math.prod(a.taps for a in out.axes)))
        kind = gs.size == 1 < g.size
        xs, gs = grown(xs, gs)
        key = (box_props != props, kind)
        if sum(c[2] == key for c in candidates) < VERIFIED - 2 and shows(f, spec, xs, gs, mode, box_props, by_values):
            candidates.append((xs, gs, key))  # the smallest few of each kind
            if sum(c[2] == (False, False) for c in candidates) == VERIFIED - 2:
                break  # as many of the best kind as a draft tries
    # A box of the plane's kind first, of more than one window where the plane has more: a
    # kernel may take another path on another kind (one-tap windows, no padding) or on a single
    # window (a compiler folds it), which the reference cannot tell.
    return [(xs, gs) for xs, gs, _ in sorted(candidates, key=lambda c: c[2])] + [grown(*plane), example]


def _boxes(spatial) -> list[tuple[slice, ...]]:
    """Every box of a spatial extent, as slices."""
    per_axis = [[slice(a, b) for a in range(n) for b in range(a + 1, n + 1)] for n in spatial]
    return [tuple(b) for b in itertools.product(*per_axis)]


def checked_sides(f: Finding, spec, x, g, mode: str) -> dict[str, np.ndarray]:
    """The expected arrays the reproducer compares: the sides the finding's claim changes on the
    case, every side for a claim that names no values."""
    want = expected(spec, x, g, mode)
    claim = claimed(f, spec, x, g, mode)
    if claim is None:
        return want
    return {side: want[side] for side, got in claim.items() if not identical(got, want[side])} or want
