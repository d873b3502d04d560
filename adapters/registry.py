"""The frameworks poolgrad knows, what their adapters offer, and whether they are installed.

Static on purpose: the pytest process parametrizes targets from this table without importing
any framework (imports happen only in that framework's worker process).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util

from .base import Target

DEVICES = ("cpu", "gpu")


@dataclasses.dataclass(frozen=True, eq=False)
class Framework:
    name: str            # target name: "torch", "tensorflow", "jax"
    module: str          # the adapter module, imported only in the worker
    import_name: str     # what must be importable for the framework to count as installed
    distributions: tuple[str, ...]  # distribution names whose version is the framework version
    variants: tuple[str, ...]
    # variant -> how the indices it returns are written (verdicts/indices.py LAYOUTS)
    index_layouts: dict = dataclasses.field(default_factory=dict)


FRAMEWORKS = {
    f.name: f for f in (
        Framework("torch", "adapters.torch_adapter", "torch", ("torch",),
                  ("eager", "channels_last", "compile", "module", "return_indices"),
                  {"return_indices": "plane"}),
        Framework("tensorflow", "adapters.tf_adapter", "tensorflow", ("tensorflow", "tensorflow-cpu"),
                  ("eager", "function", "xla", "keras", "with_argmax"),
                  {"with_argmax": "image_channels_last"}),
        Framework("jax", "adapters.jax_adapter", "jax", ("jax",), ("eager", "jit", "flax")),
    )
}


def installed(name: str) -> bool:
    """Importable, judged without importing it (that would load the framework here)."""
    return importlib.util.find_spec(FRAMEWORKS[name].import_name) is not None


def installed_version(name: str) -> str | None:
    for dist in FRAMEWORKS[name].distributions:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def all_targets() -> list[Target]:
    return [Target(f.name, v, d) for f in FRAMEWORKS.values() for v in f.variants for d in DEVICES]
