"""Case ids that read like the spec: ``<op><rank>d-<geometry>-<family>[-<variant>]-<dtype>``,
e.g. ``max_pool2d-k3s1-ties_overlap-float16``, and the geometry tags inside them.

A geometry tag is the spec's window in short form, in this order (defaults omitted):
``k<kernel>s<stride>`` then ``p<pad>`` | ``p<before>_<after>`` | ``SAME``, ``d<dilation>``,
``ceil``, ``cip0`` (count_include_pad false), ``div<divisor_override>``, ``n<norm_type>``;
adaptive ops use ``o<output_size>``; fractional_max_pool writes its regions, per dim (dims
joined by ``x``), as ``k<size>r<start>.<start>...`` where every region of a dim has one size
(``k2r0.1.3.4`` : [0, 2), [1, 3), [3, 5), [4, 6)), else as ``r<start>_<stop>.<start>_<stop>...``
(``r0_2.2_3.3_5``). Segment ops write their ids: sorted ids as the size of every segment,
``c<size>.<size>...`` (``c2.0.1`` : ids [0, 0, 2], 3 segments), others as ``s<num_segments>g<id>.<id>...``
(``s4g2.0.2.1``); their input's length is the number of ids. RoI ops write ``o<output_size>``, then
``s<spatial_scale>``, ``g<sampling_ratio>`` and ``al`` (aligned) where they are not the defaults (1, -1,
false), roi_crop_max_pool ``k<kernel>`` and ``t<stride>`` (where not the kernel) after the output size,
then ``b<box set>`` (a named set of poolgrad/cases/data/roi_boxes.toml): ``o2s0.5g2albborder``. A size that differs between spatial dims is written per
dim, ``k7x4``. The input's spatial size ends the tag as ``i<size>`` (``i7x4``) unless it is
the catalogue's default for the rank (8, 6x6, 4x4x4). A tag is both the definition and the id.
"""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path

import numpy as np

from poolgrad.reference import PoolSpec
from poolgrad.reference.roi_pool import parse_boxes
from poolgrad.reference.segment_pool import is_sorted

_N = r"\d+(?:x\d+)*"  # one size, or one per spatial dim
_STARTS = r"\d+(?:\.\d+)*"           # one dim's region starts
_PAIRS = r"\d+_\d+(?:\.\d+_\d+)*"   # one dim's [start, stop) pairs
_TAG = re.compile(
    rf"^(?:o(?P<ro>{_N})(?:k(?P<rk>{_N})(?:t(?P<rt>{_N}))?)?(?:s(?P<rs>\d+(?:\.\d+)?))?(?:g(?P<rg>\d+))?(?P<ral>al)?b(?P<rb>[a-z]+)"
    rf"|o(?P<o>{_N})|c(?P<sc>{_STARTS})|s(?P<sn>\d+)g(?P<sg>{_STARTS})|k(?P<fk>{_N})r(?P<fs>{_STARTS}(?:x{_STARTS})*)|r(?P<fr>{_PAIRS}(?:x{_PAIRS})*)"
    rf"|k(?P<k>{_N})s(?P<s>{_N})"
    rf"(?:p(?P<p>{_N})(?:_(?P<pa>\d+))?|(?P<same>SAME))?(?:d(?P<d>{_N}))?(?P<ceil>ceil)?"
    rf"(?P<cip0>cip0)?(?:div(?P<div>\d+))?(?:n(?P<n>\d+(?:\.\d+)?))?)(?:i(?P<i>{_N}))?$")
DEFAULT_SIZE = {1: (8,), 2: (6, 6), 3: (4, 4, 4)}
_BOXES_PATH = Path(__file__).parent / "data" / "roi_boxes.toml"


@functools.cache
def box_sets() -> dict[str, tuple]:
    """The named RoI box sets, canonical (reference.roi_pool.parse_boxes)."""
    with _BOXES_PATH.open("rb") as f:
        return {name: parse_boxes(boxes) for name, boxes in tomllib.load(f).items()}


def _sizes(text: str):
    """``7`` -> 7, ``7x4`` -> [7, 4]."""
    parts = [int(p) for p in text.split("x")]
    return parts[0] if len(parts) == 1 else parts


def _text(value) -> str:
    """Inverse of :func:`_sizes`: one size where every dim agrees, else one per dim."""
    if isinstance(value, tuple):
        return str(value[0]) if len(set(value)) == 1 else "x".join(map(str, value))
    return str(value)


def parse_geometry(tag: str, rank: int) -> dict:
    """The PoolSpec.from_dict fields a geometry tag stands for, for inputs of ``rank``."""
    m = _TAG.match(tag)
    if not m:
        raise ValueError(f"not a geometry tag: {tag!r}")
    if m["rb"]:
        if m["rb"] not in box_sets():
            raise ValueError(f"unknown box set {m['rb']!r} in {tag!r}; known: {', '.join(box_sets())}")
        fields = {"output_size": _sizes(m["ro"]), "boxes": [list(b) for b in box_sets()[m["rb"]]]}
        if m["rk"]:
            fields["kernel_size"] = _sizes(m["rk"])
        if m["rt"]:
            fields["stride"] = _sizes(m["rt"])
        if m["rs"]:
            fields["spatial_scale"] = float(m["rs"])
        if m["rg"]:
            fields["sampling_ratio"] = int(m["rg"])
        if m["ral"]:
            fields["aligned"] = True
        return fields
    if m["o"]:
        return {"output_size": _sizes(m["o"])}
    if m["sc"]:
        counts = [int(c) for c in m["sc"].split(".")]
        return {"segment_ids": [s for s, c in enumerate(counts) for _ in range(c)], "num_segments": len(counts)}
    if m["sg"]:
        return {"segment_ids": [int(s) for s in m["sg"].split(".")], "num_segments": int(m["sn"])}
    if m["fr"]:
        return {"regions": [[[int(b) for b in pair.split("_")] for pair in dim.split(".")]
                            for dim in m["fr"].split("x")]}
    if m["fs"]:
        dims = [[int(v) for v in dim.split(".")] for dim in m["fs"].split("x")]
        sizes = _sizes(m["fk"])
        sizes = sizes if isinstance(sizes, list) else [sizes] * len(dims)
        return {"regions": [[[v, v + k] for v in starts] for starts, k in zip(dims, sizes)]}
    fields: dict = {"kernel_size": _sizes(m["k"]), "stride": _sizes(m["s"])}
    if m["same"]:
        fields["padding"] = "SAME"
    elif m["pa"] is not None:
        fields["padding"] = [[int(m["p"]), int(m["pa"])]] * rank
    elif m["p"] is not None:
        fields["padding"] = _sizes(m["p"])
    if m["d"]:
        fields["dilation"] = _sizes(m["d"])
    if m["ceil"]:
        fields["ceil_mode"] = True
    if m["cip0"]:
        fields["count_include_pad"] = False
    if m["div"]:
        fields["divisor_override"] = int(m["div"])
    if m["n"]:
        fields["norm_type"] = float(m["n"])
    return fields


def input_size(tag: str, rank: int) -> tuple[int, ...]:
    """The spatial size a geometry tag names (its ``i`` suffix, else the rank's default)."""
    m = _TAG.match(tag)
    if not m:
        raise ValueError(f"not a geometry tag: {tag!r}")
    if m["sc"] or m["sg"]:
        return (len(parse_geometry(tag, rank)["segment_ids"]),)
    if not m["i"]:
        return DEFAULT_SIZE[rank]
    size = _sizes(m["i"])
    return tuple(size) if isinstance(size, list) else (size,) * rank


def geometry_tag(spec: PoolSpec, size: tuple[int, ...] | None = None) -> str:
    """Inverse of :func:`parse_geometry` and :func:`input_size`."""
    suffix = "" if size is None or tuple(size) == DEFAULT_SIZE[len(size)] else f"i{_text(tuple(size))}"
    if spec.is_adaptive:
        return f"o{_text(spec.output_size)}{suffix}"
    if spec.is_roi:
        return _roi_tag(spec) + suffix
    if spec.is_segment:  # the ids give the input's length: no size suffix
        if is_sorted(spec.segment_ids):
            return "c" + ".".join(map(str, np.bincount(spec.segment_ids, minlength=spec.num_segments)))
        return f"s{spec.num_segments}g" + ".".join(map(str, spec.segment_ids))
    if spec.regions is not None:
        return _regions_tag(spec.regions) + suffix
    tag = f"k{_text(spec.kernel_size)}s{_text(spec.stride)}"
    pad = spec.padding
    if pad == "SAME":
        tag += "SAME"
    elif isinstance(pad, tuple) and isinstance(pad[0], tuple):
        if len(set(pad)) != 1:
            raise ValueError(f"geometry tags write asymmetric padding only when every dim agrees, got {pad}")
        tag += f"p{pad[0][0]}_{pad[0][1]}"
    elif pad != 0 and set(pad if isinstance(pad, tuple) else (pad,)) != {0}:
        tag += f"p{_text(pad)}"
    if set(spec.dilation if isinstance(spec.dilation, tuple) else (spec.dilation,)) != {1}:
        tag += f"d{_text(spec.dilation)}"
    if spec.ceil_mode:
        tag += "ceil"
    if spec.op == "avg_pool" and not spec.count_include_pad:
        tag += "cip0"
    if spec.divisor_override is not None:
        tag += f"div{spec.divisor_override}"
    if spec.norm_type is not None:
        tag += f"n{spec.norm_type:g}"
    return tag + suffix


def _roi_tag(spec: PoolSpec) -> str:
    names = [name for name, boxes in box_sets().items() if boxes == spec.boxes]
    if not names:
        raise ValueError(f"geometry tags name RoI boxes by their set in {_BOXES_PATH.name}; {spec.boxes} is none")
    tag = f"o{_text(spec.output_size)}"
    if spec.kernel_size is not None:  # roi_crop_max_pool's max pooling over the crop
        tag += f"k{_text(spec.kernel_size)}" + (f"t{_text(spec.stride)}" if spec.stride != spec.kernel_size else "")
    if spec.spatial_scale != 1:
        tag += f"s{spec.spatial_scale:g}"
    if spec.sampling_ratio is not None and spec.sampling_ratio != -1:
        tag += f"g{spec.sampling_ratio}"
    return tag + ("al" if spec.aligned else "") + f"b{names[0]}"


def _regions_tag(regions) -> str:
    sizes = [{stop - start for start, stop in dim} for dim in regions]
    if all(len(s) == 1 for s in sizes):
        return (f"k{_text(tuple(s.pop() for s in sizes))}r"
                + "x".join(".".join(str(start) for start, _ in dim) for dim in regions))
    return "r" + "x".join(".".join(f"{start}_{stop}" for start, stop in dim) for dim in regions)


def case_id(spec: PoolSpec, family: str, variant: str | None, size: tuple[int, ...] | None = None) -> str:
    parts = [f"{spec.op}{spec.rank}d", geometry_tag(spec, size), family, variant, spec.dtype]
    return "-".join(p for p in parts if p)


def parse_id(case_id: str) -> dict:
    """Split a catalogue id into ``spec`` (PoolSpec.from_dict fields), ``family``, ``variant``
    and the input's spatial ``size``."""
    parts = case_id.split("-")
    if len(parts) not in (4, 5):
        raise ValueError(f"not a catalogue id: {case_id!r}")
    op, tag, family, *variant, dtype = parts
    rank = int(op[-2])
    spec = {"op": op, **parse_geometry(tag, rank), "dtype": dtype}
    return {"spec": spec, "family": family, "variant": variant[0] if variant else None,
            "size": input_size(tag, rank)}
