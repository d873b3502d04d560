"""What a framework registers: its record (poolgrad/adapters/registry.py discovers the records
under the ``poolgrad.adapters`` entry point group). Kept apart from the discovery, so a framework
package builds its record when it is imported, whatever was imported first."""

from __future__ import annotations

import dataclasses


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
    # API path users call -> (its variant, whether it is given padding "SAME" as a string): the
    # paths whose own geometry classes the catalogue's rows reach (poolgrad/cases/coverage.py)
    api_paths: dict = dataclasses.field(default_factory=dict)

    def worker(self, variant: str | None = None) -> WorkerSpec:
        """The worker that runs ``variant`` (None: the framework's own adapter)."""
        return self.workers.get(variant) or WorkerSpec(self.name, self.module, {}, self.import_name, self.planner)
