"""Pooling as users write it without a pooling kernel: which specs each idiom can express (pure:
imports no framework; every framework's planner asks these before it builds its own call).

- a global reduction (``x.amax(dim)``, ``reduce_max``, ``jnp.mean``, the global pooling layers)
  is the adaptive op with output size 1 in every spatial dim;
- pooling by reshape (``x.reshape(N, C, H/k, k, W/k, k).max(axis=(3, 5))``) is a window that
  tiles the input: kernel = stride, no padding, no dilation, every extent divisible (or an
  adaptive op whose bins divide the input evenly);
- patch extraction then a reduction (``F.unfold``, ``image.extract_patches``,
  ``lax.conv_general_dilated_patches``) reads every window's taps, padding included, and the
  patch functions pad with zeros.

Zero padding and the reduction decide what patch extraction can say. A max over zero padding is
not max pooling (the spec pads max with -inf): a window of negative numbers would return 0,
and a 0 in the window would tie with the padding. Whether that happens depends on the values,
which plan() never sees, so a max with any padding is Unsupported rather than a divergence the
idiom guarantees for some inputs. A mean over zero padding divides by the whole kernel: that is
avg pooling with count_include_pad=True (and no other divisor), which is planned.
"""

from __future__ import annotations

import dataclasses
import math

from poolgrad.reference.geometry import pooled_length, resolve

from .base import Unsupported

MAX_OPS = ("max_pool", "adaptive_max_pool")
GLOBAL_OPS = ("adaptive_max_pool", "adaptive_avg_pool")


def global_axes(spec, shape, ops=GLOBAL_OPS) -> tuple[int, ...] | Unsupported:
    """The spatial axes (2, 3, ...) of an (N, C, *spatial) input a global reduction reduces,
    or why ``spec`` is no global pooling of one of ``ops``."""
    if spec.op not in ops:
        return Unsupported(f"a global reduction computes {' or '.join(ops)} with output size 1; this spec is {spec.op}")
    out = resolve(spec, shape).out_shape
    if any(o != 1 for o in out):
        return Unsupported(f"output size {out}: a global reduction pools each plane to one value (output size 1 "
                           f"in every spatial dim)")
    return tuple(range(2, len(shape)))


def blocks(spec, shape) -> tuple[int, ...] | Unsupported:
    """The block per spatial dim of pooling by reshape (kernel = stride, tiling the input), or
    why ``spec`` is no such pooling."""
    if spec.op == "lp_pool":
        return Unsupported("pooling by reshape reduces with max or mean; lp_pool is neither")
    spatial = tuple(shape[2:])
    if spec.is_adaptive:
        out = resolve(spec, shape).out_shape
        if any(length % o for length, o in zip(spatial, out)):
            return Unsupported(f"adaptive bins of {spatial} into {out} are uneven: a reshape needs every "
                               f"extent divisible by its output size")
        return tuple(length // o for length, o in zip(spatial, out))
    geom = resolve(spec, shape)
    if geom.kernel_size != geom.stride:
        return Unsupported(f"kernel {geom.kernel_size} != stride {geom.stride}: a reshape tiles the input "
                           f"(non-overlapping windows that touch)")
    if any(d != 1 for d in geom.dilation):
        return Unsupported(f"dilation {geom.dilation}: a reshape's blocks are contiguous")
    if any(p != (0, 0) for p in geom.pads):
        return Unsupported(f"padding {list(geom.pads)}: a reshape pads nothing")
    if any(length % k for length, k in zip(spatial, geom.kernel_size)):
        return Unsupported(f"input {spatial} is not divisible by kernel {geom.kernel_size}: a reshape needs "
                           f"whole blocks")
    divisor = _divisor(spec, geom.kernel_size)
    return divisor if isinstance(divisor, Unsupported) else geom.kernel_size


def block_view(spec, shape, channels_last: bool = False) -> tuple[tuple, tuple] | Unsupported:
    """Pooling by reshape of x (``shape``: (N, C, *spatial)): the shape x is viewed as, each
    spatial dim split into (blocks, block), and the block axes the reduction runs over; with
    ``channels_last``, of x transposed to (N, *spatial, C) as the call runs. Or why ``spec``
    is no such pooling (``blocks``)."""
    block = blocks(spec, shape)
    if isinstance(block, Unsupported):
        return block
    split = tuple(d for length, k in zip(shape[2:], block) for d in (length // k, k))
    if channels_last:
        return (shape[0], *split, shape[1]), tuple(range(2, 2 * len(block) + 1, 2))
    return (*shape[:2], *split), tuple(range(3, 3 + 2 * len(block), 2))


def _divisor(spec, kernel) -> None | Unsupported:
    """A mean divides by the kernel's volume: avg_pool's divisor_override must agree."""
    if spec.op == "avg_pool" and spec.divisor_override not in (None, math.prod(kernel)):
        return Unsupported(f"divisor_override {spec.divisor_override}: a mean divides by the kernel volume "
                           f"{math.prod(kernel)}")
    return None


@dataclasses.dataclass(frozen=True)
class Patches:
    """The windows patch extraction reads: what every patch function takes, in its own spelling."""

    kernel: tuple
    stride: tuple
    dilation: tuple
    pads: tuple            # (before, after) per spatial dim, zero-filled by the patch function
    out_shape: tuple       # the pooled spatial shape (= the spec's)


def patches(spec, shape) -> Patches | Unsupported:
    """The windows of ``spec`` for patch extraction then max/mean, or why it cannot say the spec
    (see the module docstring for padding)."""
    if spec.op not in ("max_pool", "avg_pool"):
        return Unsupported(f"patch extraction takes a fixed window; {spec.op} has "
                           f"{'none' if spec.is_adaptive else 'another reduction than max or mean'}")
    geom = resolve(spec, shape)
    floor = tuple(pooled_length(length, k, s, d, b, a, False) for length, k, s, d, (b, a) in
                  zip(shape[2:], geom.kernel_size, geom.stride, geom.dilation, geom.pads))
    if floor != geom.out_shape:
        return Unsupported(f"ceil_mode adds a partial last window ({geom.out_shape} windows, {floor} without it): "
                           f"patch extraction has no ceil mode")
    padded = any(p != (0, 0) for p in geom.pads)
    if padded and spec.op == "max_pool":
        return Unsupported(f"padding {list(geom.pads)}: patch extraction pads with zeros, and a max over zero "
                           f"padding is not max pooling (-inf padding) wherever a window's numbers are <= 0")
    if padded and not spec.count_include_pad:
        return Unsupported(f"padding {list(geom.pads)} with count_include_pad=False: a mean over patches divides "
                           f"by the whole kernel, zero padding included")
    divisor = _divisor(spec, geom.kernel_size)
    if isinstance(divisor, Unsupported):
        return divisor
    return Patches(geom.kernel_size, geom.stride, geom.dilation, geom.pads, geom.out_shape)
