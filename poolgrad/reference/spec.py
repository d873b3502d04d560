"""PoolSpec: the pooling operation a case asks for, validated, independent of the input shape.

Rank-dependent checks (tuple lengths, kernel against padded input) happen when the spec meets
an input, in :mod:`reference.geometry`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Mapping

from .dtypes import DTYPES, dtype_from_name
from .errors import SpecError
from .fractional_max_pool import parse_regions
from .roi_pool import parse_boxes, parse_output_size, parse_sampling_ratio, parse_scale
from .segment_pool import parse_num_segments, parse_segment_ids

OPS = ("max_pool", "avg_pool", "lp_pool", "adaptive_max_pool", "adaptive_avg_pool", "fractional_max_pool",
       "segment_max_pool", "segment_avg_pool", "roi_pool", "roi_align", "roi_crop_max_pool")
MAX_OPS = ("max_pool", "adaptive_max_pool", "fractional_max_pool", "segment_max_pool", "roi_pool")
# Output (K boxes, C, ph, pw): its first dim is not the input's N, so their cases are not stacked along N.
ROI_OPS = ("roi_pool", "roi_align", "roi_crop_max_pool")
SEGMENT_OPS = ("segment_max_pool", "segment_avg_pool")
ADAPTIVE_OPS = ("adaptive_max_pool", "adaptive_avg_pool")

# Which optional fields each op takes; a field outside its op's set is an error, not ignored.
_WINDOW = {"kernel_size", "stride", "padding", "dilation", "ceil_mode"}
APPLIES = {
    "max_pool": _WINDOW,
    "avg_pool": _WINDOW | {"count_include_pad", "divisor_override"},
    "lp_pool": _WINDOW | {"norm_type"},
    "adaptive_max_pool": {"output_size"},
    "adaptive_avg_pool": {"output_size"},
    "fractional_max_pool": {"regions"},
    "segment_max_pool": {"segment_ids", "num_segments"},
    "segment_avg_pool": {"segment_ids", "num_segments"},
    "roi_pool": {"boxes", "output_size", "spatial_scale"},
    "roi_align": {"boxes", "output_size", "spatial_scale", "sampling_ratio", "aligned"},
    "roi_crop_max_pool": {"boxes", "output_size", "spatial_scale", "kernel_size", "stride"},
}
FIELDS = ("op", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "count_include_pad",
          "divisor_override", "norm_type", "output_size", "regions", "segment_ids", "num_segments",
          "boxes", "spatial_scale", "sampling_ratio", "aligned", "dtype")
_OP_WITH_RANK = re.compile(r"^(?P<op>[a-z_]+?)(?P<rank>[123])d$")


def _int_or_tuple(field, value, *, minimum, allow_none_items=False):
    """An int, or a list/tuple of ints, each >= minimum (None items where allowed)."""
    def check(v):
        if v is None and allow_none_items:
            return None
        if isinstance(v, bool) or not isinstance(v, (int,)) and not (
                isinstance(v, float) and v.is_integer()):
            raise SpecError(field, f"must be an integer or a list of integers, got {value!r}")
        if int(v) < minimum:
            word = "positive" if minimum == 1 else f">= {minimum}"
            raise SpecError(field, f"must be {word} integers, got {value!r}")
        return int(v)
    if isinstance(value, (list, tuple)):
        if not 1 <= len(value) <= 3:
            raise SpecError(field, f"must have 1, 2 or 3 entries (one per spatial dim), got {value!r}")
        return tuple(check(v) for v in value)
    return check(value)


def _pair(field, value) -> tuple[int, int]:
    """(height, width) from an int or a pair of positive ints."""
    pair = _int_or_tuple(field, value, minimum=1)
    pair = pair if isinstance(pair, tuple) else (pair, pair)
    if len(pair) != 2:
        raise SpecError(field, f"must be a positive int or [height, width], got {value!r}")
    return pair


def _padding(value):
    """int | [p per dim] | [[before, after] per dim] | "SAME" | "VALID" -> canonical form."""
    if isinstance(value, str):
        upper = value.upper()
        if upper not in ("SAME", "VALID"):
            raise SpecError("padding", f"string padding must be 'SAME' or 'VALID', got {value!r}")
        return upper
    if isinstance(value, (list, tuple)) and value and all(isinstance(p, (list, tuple)) for p in value):
        pairs = []
        for p in value:
            if len(p) != 2:
                raise SpecError("padding", f"explicit padding is one [before, after] pair per spatial dim, got {value!r}")
            pairs.append(_int_or_tuple("padding", list(p), minimum=0))
        if len(pairs) > 3:
            raise SpecError("padding", f"at most 3 spatial dims, got {value!r}")
        return tuple(pairs)
    return _int_or_tuple("padding", value, minimum=0)


def _bool(field, value):
    if not isinstance(value, bool):
        raise SpecError(field, f"must be true or false, got {value!r}")
    return value


def _given(d: Mapping, field: str, default):
    """``d[field]``, or ``default`` where it is absent or null."""
    return default if d.get(field) is None else d[field]


def _plain(v):
    """Tuples as lists (JSON's arrays). Module level: a recursive closure is a reference
    cycle per call, left to the cyclic garbage collector."""
    return [_plain(x) for x in v] if isinstance(v, tuple) else v


@dataclasses.dataclass(frozen=True)
class PoolSpec:
    """A pooling operation. Integers broadcast to every spatial dim of the input.

    ``rank`` is None unless the op was named with its rank (``max_pool2d``); then inputs of
    another rank are refused.
    """

    op: str
    kernel_size: Any = None
    stride: Any = None
    padding: Any = 0
    dilation: Any = 1
    ceil_mode: bool = False
    count_include_pad: bool = True
    divisor_override: int | None = None
    norm_type: float | None = None
    output_size: Any = None
    regions: Any = None   # fractional_max_pool: per spatial dim, ((start, stop), ...)
    segment_ids: Any = None   # segment ops: one id per item of the pooled axis, (id, ...)
    num_segments: int | None = None
    boxes: Any = None   # RoI ops: ((batch_index, x1, y1, x2, y2), ...)
    spatial_scale: float | None = None
    sampling_ratio: int | None = None
    aligned: bool | None = None
    dtype: str | None = None
    rank: int | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PoolSpec":
        if not isinstance(d, Mapping):
            raise SpecError("spec", f"must be a mapping of spec keys, got {type(d).__name__}")
        unknown = sorted(set(d) - set(FIELDS) - {"rank"})
        if unknown:
            raise SpecError(unknown[0], f"unknown spec key; allowed keys: {', '.join(FIELDS)}")
        if "op" not in d:
            raise SpecError("op", f"missing; one of {', '.join(OPS)} (optionally with 1d/2d/3d)")
        op, rank = d["op"], d.get("rank")
        m = _OP_WITH_RANK.match(op) if isinstance(op, str) else None
        if m and m["op"] in OPS:
            op, rank = m["op"], int(m["rank"])
        if op not in OPS:
            raise SpecError("op", f"unknown op {d['op']!r}; allowed: {', '.join(OPS)} (optionally with 1d/2d/3d)")
        if rank is not None and rank not in (1, 2, 3):
            raise SpecError("rank", f"must be 1, 2 or 3, got {rank!r}")
        present = {k for k, v in d.items() if k not in ("op", "rank", "dtype") and v is not None}
        extra = sorted(present - APPLIES[op])
        if extra:
            raise SpecError(extra[0], f"does not apply to {op}; it takes: {', '.join(sorted(APPLIES[op]))}")

        kw: dict[str, Any] = {"op": op, "rank": rank}
        if op in ADAPTIVE_OPS:
            if d.get("output_size") is None:
                raise SpecError("output_size", f"required for {op}: an int or one int (or null) per spatial dim")
            kw["output_size"] = _int_or_tuple("output_size", d["output_size"], minimum=1, allow_none_items=True)
        elif op == "fractional_max_pool":
            if d.get("regions") is None:
                raise SpecError("regions", "required for fractional_max_pool: one list per spatial dim of "
                                "[start, stop) pairs")
            kw["regions"] = parse_regions(d["regions"])
            if rank is not None and len(kw["regions"]) != rank:
                raise SpecError("regions", f"has {len(kw['regions'])} dims of regions but {op}{rank}d has {rank}; "
                                "give one list of regions per spatial dim")
        elif op in SEGMENT_OPS:
            if rank not in (None, 1):
                raise SpecError("rank", f"{op} pools one axis of items: its input is (N, C, items), so "
                                f"{op}1d or no rank, got {rank}d")
            for field in ("num_segments", "segment_ids"):
                if d.get(field) is None:
                    raise SpecError(field, f"required for {op}: num_segments (a positive integer) and segment_ids "
                                    "(one id per item, 0 <= id < num_segments)")
            kw["num_segments"] = parse_num_segments(d["num_segments"])
            kw["segment_ids"] = parse_segment_ids(d["segment_ids"], kw["num_segments"])
        elif op in ROI_OPS:
            if rank not in (None, 2):
                raise SpecError("rank", f"{op} pools boxes of (N, C, H, W) images: {op}2d or no rank, got {rank}d")
            for field in ("boxes", "output_size"):
                if d.get(field) is None:
                    raise SpecError(field, f"required for {op}: boxes (a list of [batch_index, x1, y1, x2, y2]) "
                                    "and output_size (an int or [height, width])")
            kw.update(boxes=parse_boxes(d["boxes"]), output_size=parse_output_size(d["output_size"]),
                      spatial_scale=parse_scale(_given(d, "spatial_scale", 1.0)))
            if op == "roi_align":  # torchvision's defaults
                kw["sampling_ratio"] = parse_sampling_ratio(_given(d, "sampling_ratio", -1))
                kw["aligned"] = _bool("aligned", _given(d, "aligned", False))
            if op == "roi_crop_max_pool":  # the max pooling over the crop, one (height, width) pair each
                if d.get("kernel_size") is None:
                    raise SpecError("kernel_size", f"required for {op}: the max pooling's window over the crop, "
                                    "a positive int or [height, width]")
                kw["kernel_size"] = _pair("kernel_size", d["kernel_size"])
                kw["stride"] = _pair("stride", _given(d, "stride", d["kernel_size"]))
        else:
            if d.get("kernel_size") is None:
                raise SpecError("kernel_size", f"required for {op}: a positive int or one per spatial dim")
            kw["kernel_size"] = _int_or_tuple("kernel_size", d["kernel_size"], minimum=1)
            if d.get("stride") is not None:
                kw["stride"] = _int_or_tuple("stride", d["stride"], minimum=1)
            if d.get("padding") is not None:
                kw["padding"] = _padding(d["padding"])
            if d.get("dilation") is not None:
                kw["dilation"] = _int_or_tuple("dilation", d["dilation"], minimum=1)
            if d.get("ceil_mode") is not None:
                kw["ceil_mode"] = _bool("ceil_mode", d["ceil_mode"])
                if kw["ceil_mode"] and kw.get("padding") == "SAME":
                    raise SpecError("ceil_mode", "does not combine with padding 'SAME' (SAME fixes the output size); use explicit padding")
        if d.get("count_include_pad") is not None:
            kw["count_include_pad"] = _bool("count_include_pad", d["count_include_pad"])
        if d.get("divisor_override") is not None:
            kw["divisor_override"] = _int_or_tuple("divisor_override", d["divisor_override"], minimum=1)
            if isinstance(kw["divisor_override"], tuple):
                raise SpecError("divisor_override", "must be one positive integer")
        if op == "lp_pool":
            p = d.get("norm_type")
            if p is None:
                raise SpecError("norm_type", "required for lp_pool: a positive finite number (e.g. 2)")
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or p <= 0:
                raise SpecError("norm_type", f"must be a positive finite number, got {p!r}")
            kw["norm_type"] = float(p)
        if d.get("dtype") is not None:
            dtype_from_name(d["dtype"])
            kw["dtype"] = d["dtype"]
        return cls(**kw)

    def to_dict(self) -> dict:
        """The case-file form: only the fields that apply to the op, JSON-ready."""
        keys = ["op", *sorted(APPLIES[self.op], key=FIELDS.index), "dtype"]
        out = {k: _plain(getattr(self, k)) for k in keys}
        if self.rank is not None:
            out["op"] = f"{self.op}{self.rank}d"
        return {k: v for k, v in out.items() if v is not None}

    @property
    def is_max(self) -> bool:
        return self.op in MAX_OPS

    @property
    def is_roi(self) -> bool:
        return self.op in ROI_OPS

    @property
    def is_segment(self) -> bool:
        return self.op in SEGMENT_OPS

    @property
    def is_adaptive(self) -> bool:
        return self.op in ADAPTIVE_OPS

    def with_dtype(self, dtype: str) -> "PoolSpec":
        if dtype not in DTYPES:
            dtype_from_name(dtype)
        return dataclasses.replace(self, dtype=dtype)
