"""Copy-paste reproducer scripts: one standalone Python file per result record.

The script rebuilds the case's input and upstream gradient from the record (compactly: a short
list, the routing probe by its formula, else the values' compressed bytes), computes what the
spec expects with plain NumPy (``templates/reproducer_spec.py.j2``: the window of every output
position, resolved here by the reference's geometry, and the spec's rule over it; for RoI ops,
``templates/reproducer_roi_spec.py.j2``: each box's bins from its coordinates), makes the call
the suite made: the one its framework's planner (``adapters.registry.plan``) gives for the
record's target at the record's ``call_shape`` when it has one (the batched call the suite made:
kernels can depend on its size), and prints the spec's result beside the framework's (the
forward and dL/dx for L = sum(pool(x) * grad_output), or for an AD mode's record the mode's
derivative along the case's direction, verdicts.ad_modes.direction), in channels-first layout
as JSON lists with the record's encoding ("nan", "inf", "-inf", "-0.0"), then the cells that
differ. It exits 1 while they differ and 0 once the framework gives the spec's result. It
imports only NumPy and the framework (and the standard library).

Each framework's template lives beside its planner, ``<planner package>/reproducer.py.j2``,
and extends ``templates/reproducer_base.py.j2`` (the record's arrays, the spec's result, the
batched call, the comparison). A variant that another planner runs (an API over a backend) gets that planner's
template, which may extend its framework's own: it is rendered with ``backend_template`` naming
that one. ``python -m poolgrad.upstream``'s drafts have scripts of their own (upstream.py.j2).

Templates render every ``{{ }}`` through ``repr``, so values from results become Python
literals and can never become code; the exceptions are an identifier checked by ``ident`` and
the array expressions built here from numbers alone (:func:`array_code`).
"""

from __future__ import annotations

import base64
import importlib
import importlib.resources
import json
import re
import zlib
from pathlib import Path

import jinja2
import ml_dtypes
import numpy as np

from poolgrad.adapters import registry
from poolgrad.adapters.base import Target, Unsupported
from poolgrad.reference import PoolSpec, resolve
from poolgrad.verdicts import ad_modes, tolerances

from .arrays import shape_of
from .records import decode_array, encode_array

TEMPLATE = "reproducer.py.j2"


class _Code(str):
    """An identifier checked by the ``ident`` filter: the one thing rendered without repr."""


def _ident(name: str) -> _Code:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"not an identifier: {name!r}")
    return _Code(name)


def _package_template(name: str) -> str | None:
    """The source of ``<package>/<file>``, read from the installed package (None: not found)."""
    package, sep, file = name.partition("/")
    if not sep:
        return None
    try:
        return importlib.resources.files(package).joinpath(file).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        return None


_ENV = jinja2.Environment(
    loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                                jinja2.FunctionLoader(_package_template)]),
    autoescape=False, undefined=jinja2.StrictUndefined,
    finalize=lambda v: v if isinstance(v, _Code) else repr(v),
    trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
_ENV.filters["ident"] = _ident


class NotReproducible(ValueError):
    """The record lacks what a script needs (arrays, a planned call, a template)."""


def _planner(framework: str, variant: str | None = None) -> str:
    """The planner package of a framework (or of the worker that runs ``variant``)."""
    try:
        planner = registry.get(framework).worker(variant).planner
    except KeyError as e:
        raise NotReproducible(e.args[0]) from None
    if planner is None:
        raise NotReproducible(f"framework {framework!r} plans no call ahead (no planner), so no script can make it")
    return planner


def script(rec: dict) -> str:
    """The reproducer for one result record."""
    if rec.get("input") is None or rec.get("grad_output") is None:
        raise NotReproducible("the record has no input or grad_output arrays")
    spec = PoolSpec.from_dict(rec["spec"])
    mode = rec.get("mode") or "backward"  # older results have no mode: the reverse mode
    if spec.is_roi and mode != "backward":
        raise NotReproducible(f"{spec.op}: the script's NumPy spec of RoI ops has the reverse mode only, "
                              f"the record's is {mode}")
    shape = tuple(rec.get("shape") or shape_of(rec["input"]))  # an empty input's shape is the record's
    call_shape = tuple(rec.get("call_shape") or shape)
    target = Target(rec["framework"], rec["variant"], rec["device"])
    planner = _planner(target.framework, target.variant)
    call = registry.plan(target, spec, call_shape)
    if isinstance(call, Unsupported):
        raise NotReproducible(f"{target.id} has no call for this spec: {call.reason}")
    dtype = rec["dtype"] or spec.dtype
    x = decode_array(rec["input"], dtype).reshape(shape)
    g = decode_array(rec["grad_output"], dtype)
    arrays = {"input": array_code(x), "grad_output": array_code(g)}
    if mode != "backward":
        # The tangent (jvp) or v (double backward) the suite used: a function of the case alone.
        arrays["direction"] = array_code(ad_modes.direction(spec, x))
    try:
        template = _ENV.get_template(f"{planner}/{TEMPLATE}")
    except jinja2.TemplateNotFound:
        raise NotReproducible(f"{planner} has no reproducer template {TEMPLATE}") from None
    return template.render(
        rec=rec, call=call, spec=spec, geom=None if spec.is_roi else resolve(spec, call_shape), rank=len(shape) - 2,
        planner=importlib.import_module(planner), backend_template=f"{_planner(target.framework)}/{TEMPLATE}",
        dtype=dtype, mode=mode, arrays=arrays, **spec_context(spec, shape, dtype))


def spec_context(spec: PoolSpec, shape, dtype: str) -> dict:
    """What templates/reproducer_spec.py.j2 needs: every output position's window per axis (the
    input positions it reads; -1 a padding tap, -2 none), the op's rule and, for sums, the bound;
    for RoI ops (``roi``) the spec's boxes and the op's parameters instead of windows."""
    tolerance = None
    if not spec.is_max:
        entry, info = tolerances.table()[spec.op][dtype], ml_dtypes.finfo(dtype)
        tolerance = (entry["atol_tiny"] * float(info.smallest_normal), entry["rtol_eps"] * float(info.eps))
    if spec.is_roi:
        return {"roi": spec.op, "tolerance": tolerance, "boxes": [list(b) for b in spec.boxes],
                **{name: getattr(spec, name) for name in ("spatial_scale", "output_size", "sampling_ratio", "aligned",
                                                          "kernel_size", "stride")}}
    windows = [np.where(a.in_input, a.positions, np.where(a.in_window & a.in_padded, -1, -2)).tolist()
               for a in resolve(spec, shape).axes]
    return {"roi": None, "windows": windows, "tolerance": tolerance,
            "kind": "max" if spec.is_max else "avg" if spec.op.endswith("avg_pool") else "lp",
            "count_padding": bool(spec.count_include_pad and not spec.is_adaptive), "segment": spec.is_segment,
            "divisor_override": spec.divisor_override, "norm_type": spec.norm_type}


# Arrays up to this many elements are written as nested lists people can read and edit.
SHORT = 64


def array_code(a: np.ndarray) -> _Code:
    """A case array (values exact in float64) as a Python expression of the script: a nested list
    when short, the routing probe by its formula, else its compressed bytes (``unpack``). Built
    from numbers alone (json of floats, a base64 string), so nothing from a record becomes code."""
    a = np.asarray(a, dtype=np.float64)
    if a.size <= SHORT:
        return _Code(f"np.array(decode({json.dumps(encode_array(a))}), dtype=np.float64).reshape({a.shape})")
    for p in range(1, 54):
        probe = np.ldexp(1.0, np.arange(a.size) % p)
        if np.array_equal(a.ravel(), probe):
            return _Code(f"np.ldexp(1.0, np.arange({a.size}) % {p}).reshape({a.shape})  # the routing probe")
    with np.errstate(over="ignore"):
        width = "<f4" if np.array_equal(a.astype(np.float32), a, equal_nan=True) else "<f8"
    text = base64.b64encode(zlib.compress(a.astype(width).tobytes(), 9)).decode("ascii")
    return _Code(f"unpack({text!r}, {width!r}, {a.shape})")


def read_output(stdout: str) -> dict[str, dict]:
    """What a script printed, by what it checked ("forward", "gradient" or the mode): the
    "expected" and "actual" arrays as the record's nested lists, and "differ" (the cells line)."""
    out: dict[str, dict] = {}
    for line in stdout.splitlines():
        m = re.match(r"(\w+), (expected by the spec|returned by [^:]+): (.*)$", line)
        if m:
            out.setdefault(m[1], {})["expected" if m[2].startswith("expected") else "actual"] = json.loads(m[3])
        elif (m := re.match(r"(\w+): (\d+ of \d+ cells differ: .*)$", line)):
            out.setdefault(m[1], {})["differ"] = m[2]
    return out


def safe_script(rec: dict) -> str | None:
    """script(rec), or None where the record cannot be reproduced (the report then says so)."""
    try:
        return script(rec)
    except (NotReproducible, ValueError, TypeError):
        return None
