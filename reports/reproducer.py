"""Copy-paste reproducer scripts: one standalone Python file per result record.

The script rebuilds the case's input and upstream gradient from the record, calls the
framework through the record's API path (variant) the way adapters/<fw>_adapter.py does, at
the record's ``call_shape`` when it has one (the batched call the suite made: kernels can
depend on its size), and
prints dL/dx (L = sum(pool(x) * grad_output)), or for an AD mode's record the mode's derivative
along the case's direction (verdicts.ad_modes.direction), in channels-first layout as one JSON nested list,
with the record's encoding ("nan", "inf", "-inf", "-0.0"). It imports only NumPy and the
framework: all geometry (pads, divisors, output sizes) is resolved here, with the reference,
and written into the script as literals.

The template renders every ``{{ }}`` through ``repr``, so values from results become Python
literals and can never become code.
"""

from __future__ import annotations

import re
from pathlib import Path

import jinja2

from reference import PoolSpec, resolve
from reference.geometry import same_padding, window_volume

from verdicts import ad_modes

from .arrays import shape_of
from .records import decode_array, encode_array



class _Code(str):
    """An identifier checked by the ``ident`` filter: the one thing rendered without repr."""


def _ident(name: str) -> _Code:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"not an identifier: {name!r}")
    return _Code(name)


_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=False, undefined=jinja2.StrictUndefined,
    finalize=lambda v: v if isinstance(v, _Code) else repr(v),
    trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
_ENV.filters["ident"] = _ident

_TORCH_MODULE = {"max_pool": "MaxPool", "avg_pool": "AvgPool", "lp_pool": "LPPool",
                 "adaptive_max_pool": "AdaptiveMaxPool", "adaptive_avg_pool": "AdaptiveAvgPool"}
_KERAS_LAYER = {"max_pool": "MaxPooling", "avg_pool": "AveragePooling",
                "adaptive_max_pool": "AdaptiveMaxPooling", "adaptive_avg_pool": "AdaptiveAveragePooling"}


class NotReproducible(ValueError):
    """The record lacks what a script needs (arrays, a known framework)."""


def _torch_call(spec, geom, rank) -> dict:
    if spec.is_adaptive:
        kwargs = {"output_size": geom.out_shape}
    else:
        symmetric = all(b == a for b, a in geom.pads)
        kwargs = {"kernel_size": geom.kernel_size, "stride": geom.stride,
                  "padding": tuple(b for b, _ in geom.pads), "ceil_mode": spec.ceil_mode}
        if spec.op == "max_pool":
            kwargs["dilation"] = geom.dilation
        elif spec.op == "avg_pool":
            kwargs["count_include_pad"] = spec.count_include_pad
            if spec.divisor_override is not None:
                kwargs["divisor_override"] = spec.divisor_override
        else:  # lp_pool takes neither padding nor dilation
            kwargs = {"norm_type": spec.norm_type, **kwargs}
            del kwargs["padding"]
            symmetric = all(p == (0, 0) for p in geom.pads)
        if not symmetric:
            return {"unsupported": f"torch pads symmetrically; this spec pads {list(geom.pads)}"}
    if rank == 1:  # as adapters/torch_adapter.py: 1-D calls take plain ints (lp_pool1d needs them)
        kwargs = {k: v[0] if isinstance(v, tuple) else v for k, v in kwargs.items()}
    return {"function": f"{spec.op}{rank}d", "module": f"{_TORCH_MODULE[spec.op]}{rank}d", "kwargs": kwargs}


def _tf_call(spec, geom, rank, variant) -> dict:
    if spec.is_adaptive:
        return {"api": "keras", "layer": f"{_KERAS_LAYER[spec.op]}{rank}D", "output_size": geom.out_shape}
    if all(p == (0, 0) for p in geom.pads):
        padding = "VALID"
    elif geom.pads == tuple(same_padding(*a) for a in zip(geom.spatial_shape, geom.kernel_size,
                                                           geom.stride, geom.dilation)):
        padding = "SAME"
    else:
        padding = [[0, 0], *map(list, geom.pads), [0, 0]]
    dilated = any(d > 1 for d in geom.dilation)
    api = {"keras": "keras", "with_argmax": "argmax"}.get(variant, "pool" if dilated else "nn")
    call = {"api": api, "kernel": geom.kernel_size, "stride": geom.stride, "dilation": geom.dilation,
            "padding": padding, "function": f"{spec.op}{rank}d",
            "pool_type": "MAX" if spec.op == "max_pool" else "AVG"}
    if api == "keras":
        call["layer"] = f"{_KERAS_LAYER.get(spec.op, '')}{rank}D"
    return call


def _jax_call(spec, geom, shape) -> dict:
    spatial = shape[2:]
    if spec.is_adaptive:
        kernel = tuple(L // o for L, o in zip(spatial, geom.out_shape))
        call = {"kernel": kernel, "stride": kernel, "dilation": (1,) * len(kernel), "pads": ((0, 0),) * len(kernel)}
    else:
        # The right pad that makes reduce_window's floor rule give exactly the spec's windows.
        pads = tuple((b, max((o - 1) * s + d * (k - 1) + 1 - L - b, 0))
                     for L, o, k, s, d, (b, _) in zip(spatial, geom.out_shape, geom.kernel_size,
                                                     geom.stride, geom.dilation, geom.pads))
        call = {"kernel": geom.kernel_size, "stride": geom.stride, "dilation": geom.dilation, "pads": pads}
    call["kind"] = "max" if spec.is_max else ("lp" if spec.op == "lp_pool" else "avg")
    if spec.op == "lp_pool":
        call["p"] = spec.norm_type
        call["scale"] = (window_volume(geom) / geom.window_counts("in_padded")).tolist()
    elif spec.op in ("avg_pool", "adaptive_avg_pool"):
        counts = geom.window_counts("in_padded" if spec.count_include_pad else "in_input")
        call["divisor"] = spec.divisor_override if spec.divisor_override is not None else counts.tolist()
    return call


def script(rec: dict) -> str:
    """The reproducer for one result record."""
    if rec.get("input") is None or rec.get("grad_output") is None:
        raise NotReproducible("the record has no input or grad_output arrays")
    framework = rec["framework"]
    spec = PoolSpec.from_dict(rec["spec"])
    shape = shape_of(rec["input"])
    geom = resolve(spec, shape)
    rank = len(shape) - 2
    if framework == "torch":
        call = _torch_call(spec, geom, rank)
    elif framework == "tensorflow":
        call = _tf_call(spec, geom, rank, rec["variant"])
    elif framework == "jax":
        call = _jax_call(spec, geom, shape)
    else:
        raise NotReproducible(f"no reproducer template for framework {framework!r}")
    mode = rec.get("mode") or "backward"  # older results have no mode: the reverse mode
    direction = None
    if mode != "backward":
        # The tangent (jvp) or v (double backward) the suite used: a function of the case alone.
        x = decode_array(rec["input"], rec["dtype"] or spec.dtype).reshape(shape)
        direction = encode_array(ad_modes.direction(spec, x))
    return _ENV.get_template(f"reproducer_{framework}.py.j2").render(
        rec=rec, call=call, rank=rank, dtype=rec["dtype"] or spec.dtype, mode=mode, direction=direction)


def safe_script(rec: dict) -> str | None:
    """script(rec), or None where the record cannot be reproduced (the report then says so)."""
    try:
        return script(rec)
    except (NotReproducible, ValueError, TypeError):
        return None
