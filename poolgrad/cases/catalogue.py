"""The case catalogue: poolgrad/cases/data/families.toml expanded into cases, deterministically.

Every case's random choices come from a generator seeded by its id, so a case does not
change when others are added or removed.
"""

from __future__ import annotations

import functools
import tomllib
import zlib
from pathlib import Path

import numpy as np

from poolgrad.reference import DTYPES, OPS, PoolSpec
from poolgrad.reference.properties import PROPERTIES, case_properties
from poolgrad.reference.spec import SEGMENT_OPS

from . import families as generators
from .ids import case_id, input_size, parse_geometry
from .model import Case, make_case

FAMILIES_PATH = Path(__file__).parent / "data" / "families.toml"
GEOMETRIES_PATH = Path(__file__).parent / "data" / "geometries.toml"
_SHAPE_DEFAULTS = {"dtypes": list(DTYPES), "ranks": [1, 2, 3], "size": [8, 6, 4], "batch": 1, "channels": 2}
_VALUE_KEYS = {"generator", "ops", "variants", "dtypes", "requires"}
_SHAPE_KEYS = {"generator", "geometries", "variants", *_SHAPE_DEFAULTS}
# N and C of a value family's cases: two planes, so a kernel that mixes planes shows it.
_BATCH, _CHANNELS = 1, 2


@functools.lru_cache(maxsize=1)
def _definitions() -> dict:
    with FAMILIES_PATH.open("rb") as f:
        data = tomllib.load(f)
    for name, fam in data.items():
        allowed = _SHAPE_KEYS if "geometries" in fam else _VALUE_KEYS
        unknown = set(fam) - allowed
        ops = set(fam.get("geometries", ())) | set(fam.get("ops", ()))
        if unknown or "generator" not in fam or ops - set(OPS):
            raise ValueError(f"{FAMILIES_PATH}: family {name}: unknown keys {sorted(unknown)} (a family "
                             f"takes {sorted(allowed)}), or no generator, or an unknown op in {sorted(ops)}")
        unknown_props = set(fam.get("requires", ())) - set(PROPERTIES)
        if unknown_props:
            raise ValueError(f"{FAMILIES_PATH}: family {name}: requires unknown case properties "
                             f"{sorted(unknown_props)}; see poolgrad/reference/properties.py")
    return data


@functools.lru_cache(maxsize=1)
def geometry_rows() -> dict[str, list[dict]]:
    """The geometry rows per op (poolgrad/cases/data/geometries.toml, made by ``python -m poolgrad.cases.coverage``)."""
    with GEOMETRIES_PATH.open("rb") as f:
        return tomllib.load(f)


def families() -> list[str]:
    return list(_definitions())


def seed_of(case_id: str) -> int:
    """The seed of a case's random choices: a stable hash of its id."""
    return zlib.crc32(case_id.encode())


def _variants(fam: dict, op: str) -> list:
    variants = fam.get("variants", [None])
    return variants.get(op, [None]) if isinstance(variants, dict) else variants


def _expand(family: str, fam: dict):
    """(spec, shape, variant) for every case a family lists: a value family in every geometry
    row of its ops and dtypes, a shape family in its own geometries."""
    if "geometries" not in fam:
        for op, rows in geometry_rows().items():
            if op not in fam.get("ops", OPS):
                continue
            for row in rows:
                if row["dtype"] not in fam.get("dtypes", DTYPES):
                    continue
                spec = PoolSpec.from_dict({"op": f"{op}{row['rank']}d", **parse_geometry(row["tag"], row["rank"]),
                                           "dtype": row["dtype"]})
                for variant in _variants(fam, op):
                    yield spec, (_BATCH, _CHANNELS, *row["size"]), variant
        return
    opt = {**_SHAPE_DEFAULTS, **fam}
    channel_list = isinstance(opt["channels"], list)
    for op, tags in fam["geometries"].items():
        for rank in opt["ranks"]:
            for tag in tags:
                for channels in opt["channels"] if channel_list else [opt["channels"]]:
                    spatial = input_size(tag, rank) if op in SEGMENT_OPS else (opt["size"][rank - 1],) * rank
                    shape = (opt["batch"], channels) + spatial  # a segment tag's ids give its length
                    for variant in [f"c{channels}"] if channel_list else _variants(opt, op):
                        for dtype in opt["dtypes"]:
                            spec = PoolSpec.from_dict({"op": f"{op}{rank}d", **parse_geometry(tag, rank),
                                                       "dtype": dtype})
                            yield spec, shape, variant


def build(family: str, spec: PoolSpec, shape: tuple, variant: str | None, draw: int = 0) -> Case | None:
    """The case a family makes for one spec, shape and variant (None where the generator
    cannot place its property in that geometry). ``draw`` > 0 makes another random draw of
    the same case, its id suffixed ``~<draw>`` (benchmarks scale the cases per spec with it)."""
    cid = case_id(spec, family, variant, shape[2:]) + (f"~{draw}" if draw else "")
    ctx = generators.Context(np.random.default_rng(seed_of(cid)), spec, shape, variant)
    source = generators.generate(_definitions()[family]["generator"], ctx)
    if source is None:
        return None
    x, g = source if isinstance(source, tuple) else (source, None)
    case = make_case(cid, family, spec, x, g)
    required = _definitions()[family].get("requires", ())
    if required and not set(required) <= case_properties(spec, case.input):
        return None
    return case


@functools.lru_cache(maxsize=2)
def _catalogue(draws: int = 1) -> tuple[Case, ...]:
    out = []
    for family, fam in _definitions().items():
        for spec, shape, variant in _expand(family, fam):
            for draw in range(draws):
                case = build(family, spec, shape, variant, draw)
                if case is not None:
                    out.append(case)
    return tuple(out)


def catalogue(draws: int = 1) -> list[Case]:
    """Every catalogue case, in a fixed order (family, op, rank, geometry, variant, dtype);
    with ``draws`` > 1, that many random draws of each (the same specs and calls, more cases)."""
    return list(_catalogue(draws))
