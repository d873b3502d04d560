"""The frameworks poolgrad knows, what their adapters offer, and whether they are installed.

Frameworks are plugins: a distribution registers a :class:`Framework` record under the
``poolgrad.adapters`` entry point group (poolgrad's own frameworks register their packages'
``FRAMEWORK`` in pyproject.toml the same way), so another package adds a framework, or a
variant run by its own adapter module, without changing poolgrad. A record is light on purpose: the pytest process parametrizes
targets from it without importing any framework; the adapter module it names is imported only
in a worker process.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import tomllib
from pathlib import Path

from .base import Plan, Target, Unsupported
from .framework import Framework, WorkerSpec

DEVICES = ("cpu", "gpu")
ENTRY_POINTS = "poolgrad.adapters"


class RegistrationError(Exception):
    """An entry point of the poolgrad.adapters group does not name a usable Framework."""


def discover(entry_points=None) -> dict[str, Framework]:
    """The registered frameworks by name, from the poolgrad.adapters entry points (or the
    given ones). An entry point is named after its framework and points at its record."""
    if entry_points is None:
        entry_points = importlib.metadata.entry_points(group=ENTRY_POINTS)
    found: dict[str, Framework] = {}
    # by name: the order in which distributions were installed (sys.path's) decides nothing
    for ep in sorted(entry_points, key=lambda ep: ep.name):
        where = f"entry point {ep.name!r} = {ep.value!r} (group {ENTRY_POINTS})"
        record = ep.load()
        if not isinstance(record, Framework):
            raise RegistrationError(f"{where}: names a {type(record).__name__}; point it at a "
                                    f"poolgrad.adapters.framework.Framework record")
        if record.name != ep.name:
            raise RegistrationError(f"{where}: the record's name is {record.name!r}; name the entry point "
                                    f"after its framework")
        if record.name == USER.name:
            raise RegistrationError(f"{where}: the name {USER.name!r} is reserved for --target kernels; "
                                    f"register the framework under another name")
        if record.name in found:
            raise RegistrationError(f"{where}: framework {record.name!r} is registered twice; uninstall "
                                    f"one of the distributions that register it")
        found[record.name] = record
    return found


# Users' own kernels (--target module:function, poolgrad/adapters/user_adapter.py): run like a framework,
# but no framework under test (no findings, no release lanes), so not among FRAMEWORKS.
USER = Framework("user", "poolgrad.adapters.user_adapter", "numpy", (), ())

FRAMEWORKS = discover()

# The frameworks poolgrad's own plugin distributions register: framework -> distribution (data).
PLUGINS = tomllib.loads((Path(__file__).parent / "plugins.toml").read_text())


def get(name: str) -> Framework:
    """The record of a registered framework, or of users' kernels."""
    if name == USER.name:
        return USER
    if name not in FRAMEWORKS:
        raise KeyError(f"no framework {name!r} is registered (entry point group {ENTRY_POINTS}); "
                       f"registered: {', '.join(FRAMEWORKS) or 'none'}")
    return FRAMEWORKS[name]


def declared(name: str) -> Framework:
    """The record of a registered framework; for one not registered here (results another
    installation wrote), a record that declares nothing of it (no env_switches, no dispatch)."""
    return FRAMEWORKS.get(name) or Framework(name, "", "", (), ())


def installed(name: str, variant: str | None = None) -> bool:
    """Importable (with what ``variant``'s worker needs), judged without importing it (that
    would load the framework here)."""
    fw = get(name)
    return all(importlib.util.find_spec(m) is not None for m in {fw.import_name, fw.worker(variant).requires})


def not_installed_hint(name: str) -> str:
    """What a user installs to check framework ``name`` (registered or one of PLUGINS)."""
    if name in PLUGINS and name not in FRAMEWORKS:
        return f"install the plugin {PLUGINS[name]} with {name} (its README)"
    return f"install {' or '.join(get(name).distributions)}"


def installed_version(name: str) -> str | None:
    for dist in get(name).distributions:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def plan(target: Target, spec, shape) -> Plan | Unsupported | None:
    """The call ``target`` makes of ``spec`` for an input of ``shape`` (N, C, *spatial), or
    Unsupported with the reason, from the framework's planner, which imports no framework: the
    worker runs this call, collection leaves out the targets that have none, and the reproducer
    writes it. None where nothing is planned ahead (users' kernels answer when called)."""
    planner = get(target.framework).worker(target.variant).planner
    if not planner:
        return None
    module = importlib.import_module(planner)
    if spec.is_roi and target.variant not in getattr(module, "ROI_VARIANTS", ()):
        # RoI pooling is a function of its own (a detection library's roi_pool, ...): planners that
        # have one name the variants that call it
        return Unsupported(f"{target.variant}: no RoI pooling (roi_pool, roi_align) in this path")
    planned = module.plan(spec, target.variant, shape)
    if not isinstance(planned, (Plan, Unsupported)):
        raise TypeError(f"{planner}.plan ({target.framework} {target.variant}) returned a {type(planned).__name__}: "
                        f"return a poolgrad.adapters.base.Plan (Keywords(kwargs) for keyword arguments, or a frozen "
                        f"dataclass deriving from Plan), or Unsupported(reason) where the variant has no call")
    return planned


def unsupported(target: Target, spec, shape) -> str | None:
    """The reason ``target`` has no call for ``spec`` on this input shape, or None."""
    planned = plan(target, spec, shape)
    return planned.reason if isinstance(planned, Unsupported) else None


def all_targets() -> list[Target]:
    return [Target(f.name, v, d) for f in FRAMEWORKS.values() for v in f.variants for d in DEVICES]
