"""The sections of docs/SEMANTICS.md: kinds of case (ties, NaNs, infinities and padding, signed
zeros, subnormals, low-precision sums, reductions and global layers, the rest), each in plain
words, and the section a finding goes to."""

from __future__ import annotations

import dataclasses
import importlib

from poolgrad.adapters.registry import FRAMEWORKS
from poolgrad.knowledge.finding import Finding


@dataclasses.dataclass(frozen=True)
class Section:
    anchor: str
    title: str
    text: str                           # what the spec does and whether it matters, in plain words
    properties: tuple[str, ...] = ()    # case properties a finding requires to be in the section


# In reading order; a finding goes to the first section that takes it (:func:`section_of`).
SECTIONS = (
    Section("ties", "Ties", """Two or more elements of a window share the maximum. The spec sends the
window's gradient to the first of them in row-major window order (`argmax`). Any single maximum is a
valid subgradient, so a path that picks another one trains the same in expectation; only bit-exact
comparisons between frameworks see it. A path that gives the gradient to every maximum multiplies it.""",
            ("ties", "ties_if_flushed")),
    Section("nans", "NaNs", """A window holds a NaN. The spec propagates it: the output is NaN and the gradient
goes to the (first) NaN. Paths that skip NaN return a number and send the gradient elsewhere, so a NaN
in activations can vanish from the loss instead of surfacing. That matters when you rely on NaN to
find a bug; after the NaN has appeared, training is already off.""",
            ("nan", "nan_several", "nan_only", "nan_with_number", "nan_not_first", "number_then_nan")),
    Section("infinities", "Infinities and padding", """A window whose real elements are all -inf (masked
activations), a window that is mostly or only padding, an infinite maximum. The spec never lets padding
win and routes an all -inf window's gradient to its first element. Paths differ in what they seed a
window with (-inf, the lowest finite number, a padding tap), which decides whether the gradient is
routed, lost or written somewhere else. Masked pooling is where this bites.""",
            ("neginf_window", "neginf_window_at_padding", "neginf_window_after_padding", "no_finite_window",
             "no_finite_window_after_padding", "padding_could_win", "empty_window", "infinite_max", "infinity", "padding",
             "ceil_overhang", "explicit_padding")),
    Section("signed-zeros", "Signed zeros", """-0.0 and +0.0 compare equal, so a window holding both is a
tie; the spec's forward returns the first and sends the gradient there. Paths that return the other zero
differ only in the sign of a zero: harmless for training, visible to bit-exact tests.""",
            ("signed_zero_tie",)),
    Section("subnormals", "Subnormals", """Numbers below the dtype's smallest normal (about 1e-38 in
float32). The spec compares them exactly. CPU paths that flush them to zero (FTZ/DAZ) turn tiny
distinct values into ties, so the gradient may go to another element of the window: a tie choice
among values that are zero for practical purposes.""",
            ("subnormal",)),
    Section("low-precision-sums", "Low-precision sums", """Where windows overlap, an element's gradient is
a sum; avg and lp pooling sum every window. The spec sums in float64 and rounds once. Paths that add in
float16, bfloat16 or float32, or in no fixed order (GPU atomics), differ in the last bits, more for
large sums, and can overflow to inf where the spec does not. Usually harmless; check it when you train
in float16 or need bitwise reproducibility.""",
            ("window_sum_overflows", "power_sum_overflows", "power_overflows")),
    Section("reductions", "Reductions and global layers", """Pooling written as a reduction (`amax`,
`reduce_max`, `mean` over the spatial axes), by reshape, over extracted patches, or as a global pooling
layer is adaptive pooling with output size 1, or a window that tiles the input. The spec is the same as
for the pooling functions, and the suite checks these paths against it.""",
            ("adaptive_unit_axis", "adaptive_unit_last_axis")),
    Section("other", "Other cases: dtypes, geometry, refused calls", """Behaviours tied to a dtype, a window
geometry (dilation, ceil_mode, lp_pool at zero) or an empty batch rather than to the values: a call
refused where the spec has a result, a crash, or a gradient that is wrong for that geometry."""),
)


def idiom_variants(framework: str) -> tuple[str, ...]:
    """The variants of ``framework`` that pool by a reduction, reshape, patches or a global layer
    (the ``IDIOMS`` of the planner that plans each variant)."""
    fw = FRAMEWORKS.get(framework)
    if fw is None:
        return ()
    planners = {v: fw.worker(v).planner for v in fw.variants}
    return tuple(v for v, planner in planners.items()
                 if planner and v in getattr(importlib.import_module(planner), "IDIOMS", ()))


def _required(f: Finding) -> set[str]:
    """The case properties the finding requires (of its case, or of its call)."""
    return {alt for r in (*f.when, *f.when_call) if "!" not in r for alt in r.split("|")}


def section_of(f: Finding) -> Section:
    """Reductions first (by path), subnormals, low-precision sums (by claim), then by the case's
    values, then by the policy claimed."""
    by_anchor = {s.anchor: s for s in SECTIONS}
    required = _required(f)
    idioms = idiom_variants(f.framework)
    if (idioms and all(v in idioms for v in f.variants)) or required & set(by_anchor["reductions"].properties):
        return by_anchor["reductions"]
    if "subnormal" in required:
        return by_anchor["subnormals"]
    sums = ("accumulate" in f.forward or "accumulate" in f.gradient or f.verdict == "nondeterministic"
            or f.impact == "rounding")
    if sums or required & set(by_anchor["low-precision-sums"].properties):
        return by_anchor["low-precision-sums"]
    for anchor in ("signed-zeros", "nans", "infinities", "ties"):
        if required & set(by_anchor[anchor].properties):
            return by_anchor[anchor]
    # No case property decides: what the claimed policy is about does (an AD mode's claim).
    claimed = {*f.forward, *f.gradient}
    for keys, anchor in ((("signed_zero",), "signed-zeros"), (("nan", "nan_tie"), "nans"), (("ftz",), "subnormals"),
                         (("init", "padding"), "infinities"), (("tie", "order"), "ties")):
        if claimed & set(keys):
            return by_anchor[anchor]
    return by_anchor["other"]
