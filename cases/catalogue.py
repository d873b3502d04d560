"""The case catalogue: cases/data/families.toml expanded into cases, deterministically.

Every case's random choices come from a generator seeded by its id, so a case does not
change when others are added or removed.
"""

from __future__ import annotations

import functools
import tomllib
import zlib
from pathlib import Path

import numpy as np

from reference import OPS, PoolSpec

from . import families as generators
from .ids import case_id, parse_geometry
from .model import Case, make_case

FAMILIES_PATH = Path(__file__).parent / "data" / "families.toml"
_DEFAULTS = {"dtypes": ["float16", "bfloat16", "float32", "float64"], "ranks": [1, 2, 3],
             "size": [8, 6, 4], "size_for": {}, "batch": 1, "channels": 2, "variants": [None]}
_KEYS = {"generator", "geometries", *_DEFAULTS}


@functools.lru_cache(maxsize=1)
def _definitions() -> dict:
    with FAMILIES_PATH.open("rb") as f:
        data = tomllib.load(f)
    for name, fam in data.items():
        unknown = set(fam) - _KEYS
        if unknown or "generator" not in fam or set(fam.get("geometries", ())) - set(OPS):
            raise ValueError(f"{FAMILIES_PATH}: family {name}: unknown keys {sorted(unknown)}, "
                             f"or no generator, or geometries for an unknown op")
    return data


def families() -> list[str]:
    return list(_definitions())


def seed_of(case_id: str) -> int:
    """The seed of a case's random choices: a stable hash of its id."""
    return zlib.crc32(case_id.encode())


def _expand(family: str, fam: dict):
    """(spec, shape, variant) for every case a family definition lists. A list of channel
    counts makes one case per count, its variant naming the count (``c33``)."""
    opt = {**_DEFAULTS, **fam}
    channel_list = isinstance(opt["channels"], list)
    for op, tags in fam["geometries"].items():
        variants = opt["variants"][op] if isinstance(opt["variants"], dict) else opt["variants"]
        for rank in opt["ranks"]:
            for tag in tags:
                length = opt["size_for"].get(tag, opt["size"])[rank - 1]
                for channels in opt["channels"] if channel_list else [opt["channels"]]:
                    shape = (opt["batch"], channels) + (length,) * rank
                    for variant in [f"c{channels}"] if channel_list else variants:
                        for dtype in opt["dtypes"]:
                            spec = PoolSpec.from_dict({"op": f"{op}{rank}d", **parse_geometry(tag, rank),
                                                       "dtype": dtype})
                            yield spec, shape, variant


def build(family: str, spec: PoolSpec, shape: tuple, variant: str | None) -> Case | None:
    """The case a family makes for one spec, shape and variant (None where the generator
    cannot place its property in that geometry)."""
    cid = case_id(spec, family, variant)
    ctx = generators.Context(np.random.default_rng(seed_of(cid)), spec, shape, variant)
    source = generators.generate(_definitions()[family]["generator"], ctx)
    return None if source is None else make_case(cid, family, spec, source)


@functools.lru_cache(maxsize=1)
def _catalogue() -> tuple[Case, ...]:
    out = []
    for family, fam in _definitions().items():
        for spec, shape, variant in _expand(family, fam):
            case = build(family, spec, shape, variant)
            if case is not None:
                out.append(case)
    return tuple(out)


def catalogue() -> list[Case]:
    """Every catalogue case, in a fixed order (family, op, rank, geometry, variant, dtype)."""
    return list(_catalogue())
