"""The frameworks poolgrad knows, what their adapters offer, and whether they are installed.

Frameworks are plugins: a distribution registers a :class:`Framework` record under the
``poolgrad.adapters`` entry point group (poolgrad registers its own three in pyproject.toml the
same way), so another package adds a framework, or a variant run by its own adapter module,
without changing poolgrad. A record is light on purpose: the pytest process parametrizes
targets from it without importing any framework; the adapter module it names is imported only
in a worker process.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util

from . import jax as jax_plan, keras as keras_plan, tensorflow as tensorflow_plan, torch as torch_plan
from .base import Target, Unsupported

DEVICES = ("cpu", "gpu")
ENTRY_POINTS = "poolgrad.adapters"


class RegistrationError(Exception):
    """An entry point of the poolgrad.adapters group does not name a usable Framework."""


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """One worker process: the pool starts one per name."""

    name: str
    module: str          # the adapter module it imports (its ``ADAPTER``)
    env: dict            # set before that import (e.g. KERAS_BACKEND)
    requires: str        # importable for the variants it runs to count as installed
    planner: str | None = None  # module whose ``plan`` maps a spec to the call (see ``plan``)


@dataclasses.dataclass(frozen=True, eq=False)
class Framework:
    name: str            # target name: "torch", "tensorflow", "jax"
    module: str          # the adapter module, imported only in the worker
    import_name: str     # what must be importable for the framework to count as installed
    distributions: tuple[str, ...]  # distribution names whose version is the framework version
    variants: tuple[str, ...]
    # variant -> how the indices it returns are written (poolgrad/verdicts/indices.py LAYOUTS)
    index_layouts: dict = dataclasses.field(default_factory=dict)
    # variant -> WorkerSpec, for variants another adapter module runs in a worker of its own
    workers: dict = dataclasses.field(default_factory=dict)
    planner: str | None = None  # module whose ``plan`` maps a spec to the call (see ``plan``)
    # AD mode ("jvp", "double_backward") -> the variants that run it by default (suite/ad_modes.py)
    ad_modes: dict = dataclasses.field(default_factory=dict)
    # variant -> seconds one batching group (a call, a compilation) costs cold on 2 cores; only
    # to hand out the heaviest work first (suite/scheduling.py); absent: the default
    costs: dict = dataclasses.field(default_factory=dict)
    # environment variables that change the framework's pooling, recorded with every run
    env_switches: tuple[str, ...] = ()

    def worker(self, variant: str | None = None) -> WorkerSpec:
        """The worker that runs ``variant`` (None: the framework's own adapter)."""
        return self.workers.get(variant) or WorkerSpec(self.name, self.module, {}, self.import_name, self.planner)


def keras_on(backend: str) -> dict:
    """The Keras variants of a framework (``keras``, ``keras_global``, ...): Keras 3's pooling
    layers with the framework as Keras's backend. Keras fixes its backend when it is imported
    (KERAS_BACKEND), so Keras on each backend runs in a worker of its own."""
    worker = WorkerSpec(f"{backend}-keras", "poolgrad.adapters.keras.adapter", {"KERAS_BACKEND": backend}, "keras",
                        "poolgrad.adapters.keras")
    return dict.fromkeys(keras_plan.VARIANTS, worker)


# poolgrad's own frameworks, registered in pyproject.toml like any plugin's. A framework's home
# is its package: ``adapters.<name>`` plans calls and lists variants, ``.adapter`` runs them.
TORCH = Framework("torch", "poolgrad.adapters.torch.adapter", "torch", ("torch",), (*torch_plan.VARIANTS, *keras_plan.VARIANTS),
                  {"return_indices": "plane", "max_dim": "plane"}, keras_on("torch"), "poolgrad.adapters.torch",
                  ad_modes=torch_plan.AD_MODES, costs=torch_plan.COSTS, env_switches=torch_plan.ENV_SWITCHES)
TENSORFLOW = Framework("tensorflow", "poolgrad.adapters.tensorflow.adapter", "tensorflow", ("tensorflow", "tensorflow-cpu"),
                       (*tensorflow_plan.VARIANTS, *keras_plan.VARIANTS), {"with_argmax": "image_channels_last"},
                       keras_on("tensorflow"), "poolgrad.adapters.tensorflow", ad_modes=tensorflow_plan.AD_MODES,
                       costs=tensorflow_plan.COSTS, env_switches=tensorflow_plan.ENV_SWITCHES)
JAX = Framework("jax", "poolgrad.adapters.jax.adapter", "jax", ("jax",), (*jax_plan.VARIANTS, *keras_plan.VARIANTS),
                workers=keras_on("jax"), planner="poolgrad.adapters.jax", ad_modes=jax_plan.AD_MODES,
                costs=jax_plan.COSTS, env_switches=jax_plan.ENV_SWITCHES)


def discover(entry_points=None) -> dict[str, Framework]:
    """The registered frameworks by name, from the poolgrad.adapters entry points (or the
    given ones). An entry point is named after its framework and points at its record."""
    if entry_points is None:
        entry_points = importlib.metadata.entry_points(group=ENTRY_POINTS)
    found: dict[str, Framework] = {}
    for ep in entry_points:
        where = f"entry point {ep.name!r} = {ep.value!r} (group {ENTRY_POINTS})"
        record = ep.load()
        if not isinstance(record, Framework):
            raise RegistrationError(f"{where}: names a {type(record).__name__}; point it at a "
                                    f"poolgrad.adapters.registry.Framework record")
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


def get(name: str) -> Framework:
    """The record of a registered framework, or of users' kernels."""
    if name == USER.name:
        return USER
    if name not in FRAMEWORKS:
        raise KeyError(f"no framework {name!r} is registered (entry point group {ENTRY_POINTS}); "
                       f"registered: {', '.join(FRAMEWORKS) or 'none'}")
    return FRAMEWORKS[name]


def installed(name: str, variant: str | None = None) -> bool:
    """Importable (with what ``variant``'s worker needs), judged without importing it (that
    would load the framework here)."""
    fw = get(name)
    return all(importlib.util.find_spec(m) is not None for m in {fw.import_name, fw.worker(variant).requires})


def installed_version(name: str) -> str | None:
    for dist in get(name).distributions:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def plan(target: Target, spec, shape):
    """The call ``target`` makes of ``spec`` for an input of ``shape`` (N, C, *spatial), or
    Unsupported with the reason, from the framework's planner, which imports no framework: the
    worker runs this call, collection leaves out the targets that have none, and the reproducer
    writes it. None where nothing is planned ahead (users' kernels answer when called)."""
    planner = get(target.framework).worker(target.variant).planner
    return importlib.import_module(planner).plan(spec, target.variant, shape) if planner else None


def unsupported(target: Target, spec, shape) -> str | None:
    """The reason ``target`` has no call for ``spec`` on this input shape, or None."""
    planned = plan(target, spec, shape)
    return planned.reason if isinstance(planned, Unsupported) else None


def all_targets() -> list[Target]:
    return [Target(f.name, v, d) for f in FRAMEWORKS.values() for v in f.variants for d in DEVICES]
