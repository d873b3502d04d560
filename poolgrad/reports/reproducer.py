"""Copy-paste reproducer scripts: one standalone Python file per result record.

The script rebuilds the case's input and upstream gradient from the record, makes the call the
suite made: the one its framework's planner (``adapters.registry.plan``) gives for the record's
target at the record's ``call_shape`` when it has one (the batched call the suite made: kernels
can depend on its size), and prints dL/dx (L = sum(pool(x) * grad_output)), or for an AD mode's
record the mode's derivative along the case's direction (verdicts.ad_modes.direction), in
channels-first layout as one JSON nested list, with the record's encoding ("nan", "inf",
"-inf", "-0.0"). It imports only NumPy and the framework: the planned arguments and the
geometry (resolved here, with the reference) are written into the script as literals.

Each framework's template lives beside its planner, ``<planner package>/reproducer.py.j2``,
and extends ``templates/reproducer_base.py.j2`` (the record's arrays, the batched call, the
printing). A variant that another planner runs (keras) gets that planner's template, which may
extend its framework's own: it is rendered with ``backend_template`` naming that one.

Templates render every ``{{ }}`` through ``repr``, so values from results become Python
literals and can never become code; the one exception is an identifier checked by ``ident``.
"""

from __future__ import annotations

import importlib
import importlib.resources
import re
from pathlib import Path

import jinja2

from poolgrad.adapters import registry
from poolgrad.adapters.base import Target, Unsupported
from poolgrad.reference import PoolSpec, resolve
from poolgrad.verdicts import ad_modes

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
    shape = shape_of(rec["input"])
    call_shape = tuple(rec.get("call_shape") or shape)
    target = Target(rec["framework"], rec["variant"], rec["device"])
    planner = _planner(target.framework, target.variant)
    call = registry.plan(target, spec, call_shape)
    if isinstance(call, Unsupported):
        raise NotReproducible(f"{target.id} has no call for this spec: {call.reason}")
    mode = rec.get("mode") or "backward"  # older results have no mode: the reverse mode
    direction = None
    if mode != "backward":
        # The tangent (jvp) or v (double backward) the suite used: a function of the case alone.
        x = decode_array(rec["input"], rec["dtype"] or spec.dtype).reshape(shape)
        direction = encode_array(ad_modes.direction(spec, x))
    try:
        template = _ENV.get_template(f"{planner}/{TEMPLATE}")
    except jinja2.TemplateNotFound:
        raise NotReproducible(f"{planner} has no reproducer template {TEMPLATE}") from None
    return template.render(
        rec=rec, call=call, spec=spec, geom=resolve(spec, call_shape), rank=len(shape) - 2,
        planner=importlib.import_module(planner), backend_template=f"{_planner(target.framework)}/{TEMPLATE}",
        dtype=rec["dtype"] or spec.dtype, mode=mode, direction=direction)


def safe_script(rec: dict) -> str | None:
    """script(rec), or None where the record cannot be reproduced (the report then says so)."""
    try:
        return script(rec)
    except (NotReproducible, ValueError, TypeError):
        return None
