"""What a framework registers: its record (poolgrad/adapters/registry.py discovers the records
under the ``poolgrad.adapters`` entry point group). Kept apart from the discovery, so a framework
package builds its record when it is imported, whatever was imported first."""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable
from pathlib import Path

from poolgrad.reference.properties import PROPERTIES


class Dispatch:
    """What of a framework's environment decides which of its kernels run, for findings to scope
    on (poolgrad/knowledge/machine.py, Machine) and release lanes to be named by. This base is a
    framework whose environment decides nothing of the kind; a framework package whose kernels
    dispatch on its environment (a kernel library's switches) supplies its own.

    ``environment``: the framework's, as a run records it (Framework.dispatch_environment)."""

    # the names of the facts machine_facts reports, which findings' ``machine`` tables name
    facts: tuple[str, ...] = ()
    # top-level fields of the environment record that older results files carry for this
    # dispatch: readers accept them (the run's env_switches hold the same)
    older_environment_fields: tuple[str, ...] = ()

    def kernel_features(self, cpu_features: frozenset[str], environment: dict) -> frozenset[str]:
        """The CPU features the framework's kernels may use."""
        return cpu_features

    def machine_facts(self, environment: dict) -> dict:
        """Named facts (``{"name": True}``) that findings' ``machine`` tables scope on."""
        return {}

    def lane(self, environment: dict) -> str:
        """What sets a release lane apart in its name (``"-isa-avx2"``); "" for nothing."""
        return ""

    def switches_excluding(self, features: set[str]) -> dict:
        """Environment switches that keep the framework's kernels off ``features`` ({}: none)."""
        return {}


@dataclasses.dataclass(frozen=True)
class WorkerEnvironment:
    """The variables a framework needs in the suite's workers, by what they are for; the pool
    (poolgrad/adapters/pool.py) sets every record's in every worker, since a worker may load
    another framework (an API that runs on a backend)."""

    # its compute on one thread, for runs that already keep every core busy
    one_thread: dict = dataclasses.field(default_factory=dict)
    # several processes sharing one GPU (a value the user set wins)
    shared_gpu: dict = dataclasses.field(default_factory=dict)
    # directory -> the variables that keep its compiler's persistent cache under it
    # (--compile-cache); None: it has no cache to keep
    compile_cache: Callable[[Path], dict] | None = None


@dataclasses.dataclass(frozen=True)
class Upstream:
    """Where a package's bugs are reported: python -m poolgrad.upstream's drafts name it."""

    repository: str      # GitHub owner/name
    form: str = ""       # the issue form a draft follows there


@dataclasses.dataclass(frozen=True)
class Unstacked:
    """Cases a path runs in a call of their own, never stacked along N with other cases
    (poolgrad/suite/call.py): where its kernel can write outside a case's own (n, c) planes,
    as a window with no candidate whose index -1 sends its gradient to the element before its
    plane, which in a stack is another case's. Declared by case property, as findings scope."""

    variants: tuple[str, ...]    # variant globs
    ops: tuple[str, ...]         # op globs with the rank ("max_pool*", "adaptive_max_pool2d")
    properties: tuple[str, ...]  # a case with all of these (reference/properties.py) runs alone

    def __post_init__(self):
        unknown = set(self.properties) - set(PROPERTIES)
        if unknown:  # a misspelt property would stack the very cases it names
            raise ValueError(f"Unstacked: unknown case properties {sorted(unknown)}")

    def covers(self, variant: str, op: str) -> bool:
        return (any(fnmatch.fnmatchcase(variant, v) for v in self.variants)
                and any(fnmatch.fnmatchcase(op, o) for o in self.ops))

    def holds(self, properties: frozenset[str]) -> bool:
        return properties.issuperset(self.properties)


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """One worker process: the pool starts one per name."""

    name: str
    module: str          # the adapter module it imports (its ``ADAPTER``)
    env: dict            # set before that import (e.g. the backend an API runs on)
    requires: str        # importable for the variants it runs to count as installed
    planner: str | None = None  # module whose ``plan`` maps a spec to the call (see ``plan``)
    # where the variants it runs are reported, where not the framework's (an API over a backend)
    upstream: Upstream | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class Framework:
    name: str            # target name (the framework's, e.g. its import name)
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
    # what of its environment decides which kernels run
    dispatch: Dispatch = Dispatch()
    # API path users call -> (its variant, whether it is given padding "SAME" as a string): the
    # paths whose own geometry classes the catalogue's rows reach (poolgrad/cases/api_paths.py)
    api_paths: dict = dataclasses.field(default_factory=dict)
    # what its workers need set (poolgrad/adapters/pool.py)
    worker_environment: WorkerEnvironment = WorkerEnvironment()
    # where its bugs are reported; None: nowhere poolgrad knows
    upstream: Upstream | None = None
    # the cases each path keeps out of stacked calls (every other case stacks with its group's)
    unstacked: tuple[Unstacked, ...] = ()
    # variant -> how many batching groups at most run as one worker call (its adapter's
    # ``run_bundle``): a compiler's fixed cost per compiled function is paid once for them all.
    # Such a variant's groups are scheduled in work units of that many (suite/scheduling.py).
    bundles: dict = dataclasses.field(default_factory=dict)
    # the stacked calls kept out of bundles, by their cases' properties: where one case fails
    # its call (a kernel's assert), it would fail every group's in the bundle
    unbundled: tuple[Unstacked, ...] = ()

    def unbundling(self, variant: str, op: str) -> tuple[Unstacked, ...]:
        """The declarations that keep some calls of ``op`` out of ``variant``'s bundles."""
        return tuple(rule for rule in self.unbundled if rule.covers(variant, op))

    def unstacking(self, variant: str, op: str) -> tuple[Unstacked, ...]:
        """The declarations that keep some cases of ``op`` out of ``variant``'s stacked calls."""
        return tuple(rule for rule in self.unstacked if rule.covers(variant, op))

    def dispatch_environment(self, switches: dict, reported: dict) -> dict:
        """The framework's environment as a run records it: what its adapter ``reported``, over
        the values the run gave its env_switches (``switches``: the run's)."""
        return {**{k: switches[k] for k in self.env_switches if k in switches}, **reported}

    def environment_in(self, record: dict) -> dict:
        """Its environment in a results file's environment record (older files keep the run's
        switches only in ``env_switches``)."""
        reported = (record.get("frameworks") or {}).get(self.name, {}).get("environment") or {}
        return self.dispatch_environment(record.get("env_switches") or {}, reported)

    def worker(self, variant: str | None = None) -> WorkerSpec:
        """The worker that runs ``variant`` (None: the framework's own adapter)."""
        return self.workers.get(variant) or WorkerSpec(self.name, self.module, {}, self.import_name, self.planner)
