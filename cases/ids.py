"""Case ids that read like the spec: ``<op><rank>d-<geometry>-<family>[-<variant>]-<dtype>``,
e.g. ``max_pool2d-k3s1-ties_overlap-float16``, and the geometry tags inside them.

A geometry tag is the spec's window in short form, in this order (defaults omitted):
``k<kernel>s<stride>`` then ``p<pad>`` | ``p<before>_<after>`` | ``SAME``, ``d<dilation>``,
``ceil``, ``cip0`` (count_include_pad false), ``div<divisor_override>``, ``n<norm_type>``;
adaptive ops use ``o<output_size>``. Sizes are the same on every spatial dim. The catalogue's
family definitions name their geometries by tag, so a tag is both the definition and the id.
"""

from __future__ import annotations

import re

from reference import PoolSpec

_TAG = re.compile(
    r"^(?:o(?P<o>\d+)|k(?P<k>\d+)s(?P<s>\d+)"
    r"(?:p(?P<p>\d+)(?:_(?P<pa>\d+))?|(?P<same>SAME))?(?:d(?P<d>\d+))?(?P<ceil>ceil)?"
    r"(?P<cip0>cip0)?(?:div(?P<div>\d+))?(?:n(?P<n>\d+(?:\.\d+)?))?)$")


def parse_geometry(tag: str, rank: int) -> dict:
    """The PoolSpec.from_dict fields a geometry tag stands for, for inputs of ``rank``."""
    m = _TAG.match(tag)
    if not m:
        raise ValueError(f"not a geometry tag: {tag!r}")
    if m["o"]:
        return {"output_size": int(m["o"])}
    fields: dict = {"kernel_size": int(m["k"]), "stride": int(m["s"])}
    if m["same"]:
        fields["padding"] = "SAME"
    elif m["pa"] is not None:
        fields["padding"] = [[int(m["p"]), int(m["pa"])]] * rank
    elif m["p"] is not None:
        fields["padding"] = int(m["p"])
    if m["d"]:
        fields["dilation"] = int(m["d"])
    if m["ceil"]:
        fields["ceil_mode"] = True
    if m["cip0"]:
        fields["count_include_pad"] = False
    if m["div"]:
        fields["divisor_override"] = int(m["div"])
    if m["n"]:
        fields["norm_type"] = float(m["n"])
    return fields


def _uniform(value):
    """The one size of an int or of a per-dim tuple whose entries agree."""
    if isinstance(value, tuple):
        if len(set(value)) != 1:
            raise ValueError(f"geometry tags need the same size on every dim, got {value}")
        return value[0]
    return value


def geometry_tag(spec: PoolSpec) -> str:
    """Inverse of :func:`parse_geometry` (for the uniform geometries the catalogue uses)."""
    if spec.is_adaptive:
        return f"o{_uniform(spec.output_size)}"
    tag = f"k{_uniform(spec.kernel_size)}s{_uniform(spec.stride)}"
    pad = spec.padding
    if pad == "SAME":
        tag += "SAME"
    elif isinstance(pad, tuple) and isinstance(pad[0], tuple):
        before, after = _uniform(pad)
        tag += f"p{before}_{after}"
    elif _uniform(pad):
        tag += f"p{_uniform(pad)}"
    if _uniform(spec.dilation) != 1:
        tag += f"d{_uniform(spec.dilation)}"
    if spec.ceil_mode:
        tag += "ceil"
    if spec.op == "avg_pool" and not spec.count_include_pad:
        tag += "cip0"
    if spec.divisor_override is not None:
        tag += f"div{spec.divisor_override}"
    if spec.norm_type is not None:
        tag += f"n{spec.norm_type:g}"
    return tag


def case_id(spec: PoolSpec, family: str, variant: str | None) -> str:
    parts = [f"{spec.op}{spec.rank}d", geometry_tag(spec), family, variant, spec.dtype]
    return "-".join(p for p in parts if p)


def parse_id(case_id: str) -> dict:
    """Split a catalogue id into ``spec`` (PoolSpec.from_dict fields), ``family``, ``variant``."""
    parts = case_id.split("-")
    if len(parts) not in (4, 5):
        raise ValueError(f"not a catalogue id: {case_id!r}")
    op, tag, family, *variant, dtype = parts
    rank = int(op[-2])
    spec = {"op": op, **parse_geometry(tag, rank), "dtype": dtype}
    return {"spec": spec, "family": family, "variant": variant[0] if variant else None}
