"""WorkerPool: one warm worker process per framework, batched calls, crash and hang isolation.

One pool per pytest process. A framework's worker starts on first use and stays warm across
calls; frameworks never share a process, so their thread pools, import order and memory do
not meet. A variant the registry gives a worker of its own (a layer library on a backend) gets one. A worker that dies or hangs turns the affected cases into CRASH / TIMEOUT outcomes
and is restarted on the next call.

Not thread-safe: call it from one thread.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path

import numpy as np

from . import registry
from .base import BUNDLE, CRASH, ERROR, NO_DEVICE, NOT_INSTALLED, OK, TIMEOUT, Outcome, Target
from .worker import Lost, Worker

START_TIMEOUT_S = 300.0  # spawning plus importing a framework; generous for cold disks

# What the registered frameworks declare for their workers (WorkerEnvironment), set in every
# worker whichever framework it runs: a worker may load another framework (a layer library its backend),
# and a variable a framework does not read changes nothing for it.
_DECLARED = [fw.worker_environment for fw in registry.FRAMEWORKS.values()]

# One compute thread per framework, for runs that already keep every core busy (-n 2 on two
# cores): there, OpenMP barriers wait on descheduled threads, and a tiny pooling call waits far
# longer for its threads than it computes.
# Results are not expected to depend on it (CPU pooling kernels split work across planes).
# OpenMP's and MKL's own variables, then each framework's thread pools'.
ONE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                  **{k: v for declared in _DECLARED for k, v in declared.one_thread.items()}}

# Several processes share one GPU under -n N: each framework says what keeps one of them from
# taking the GPU's memory, or its CUDA, from the others. A value the user set wins.
SHARED_GPU_ENV = {k: v for declared in _DECLARED for k, v in declared.shared_gpu.items()}


def shared_gpu_env() -> dict[str, str]:
    return {k: v for k, v in SHARED_GPU_ENV.items() if k not in os.environ}


def compile_cache_env(root: str | Path) -> dict[str, str]:
    """Worker environment giving each framework's compiler a persistent cache under ``root``.

    The frameworks key their caches on the program, the compile options and their own
    versions, so a hit returns what compiling again would return and only compile time
    differs: a rerun of the catalogue on the same machine skips C++ builds and LLVM codegen
    """
    root = Path(root)
    return {k: v for declared in _DECLARED if declared.compile_cache
            for k, v in declared.compile_cache(root).items()}


class WorkerPool:
    def __init__(self, start_timeout_s: float = START_TIMEOUT_S, env: dict[str, str] | None = None):
        """``env``: variables set in every worker before it imports its framework (e.g.
        ONE_THREAD_ENV); by default workers inherit this process's environment unchanged."""
        self.start_timeout_s = start_timeout_s
        self.env = dict(env or {})
        self._workers: dict[str, Worker] = {}
        self._descriptions: dict[str, dict] = {}
        atexit.register(self.close)

    def describe(self, framework: str, variant: str | None = None) -> dict:
        """{status, message, version, devices, variants, environment, startup_s} of the worker
        that runs ``variant`` (by default the framework's own); cached.

        status is OK, or NOT_INSTALLED (nothing is started), or ERROR / CRASH / TIMEOUT when
        the worker could not import the adapter; message then says why.
        """
        spec = registry.get(framework).worker(variant)
        if spec.name not in self._descriptions:
            if not registry.installed(framework, variant):
                missing = framework if not registry.installed(framework) else f"{spec.requires} (for {spec.name})"
                self._descriptions[spec.name] = {"status": NOT_INSTALLED, "message": f"{missing} is not installed"}
            else:
                self._descriptions[spec.name] = self._start(spec)
        return self._descriptions[spec.name]

    def run_group(self, target: Target, spec, xs: list[np.ndarray], gs: list[np.ndarray],
                  timeout_s: float, method: str = "run", extras: list[tuple] | None = None) -> list[Outcome]:
        """One Outcome per case. Cases whose x and grad_output agree in dtype and in shape past
        N are stacked along N and run as one worker call with ``timeout_s`` for the call; if
        that call crashes or raises, each case is rerun by itself (in a call of the same shape)
        so only the failing ones get CRASH / ERROR.

        ``method`` is the adapter method (base.METHODS); ``extras`` the further arrays it takes,
        one tuple per case (the AD modes' tangent or v, x's shape), stacked like x.
        """
        extras = extras or [()] * len(xs)
        if (absent := self._absent(target)) is not None:
            return [Outcome(absent.status, message=absent.message) for _ in xs]
        results: list[Outcome | None] = [None] * len(xs)
        for members in _stackable(xs, gs):
            call = _Call(method, [extras[i] for i in members])
            outcomes = self._run_stacked(target, spec, [xs[i] for i in members], [gs[i] for i in members],
                                         timeout_s, call)
            for i, outcome in zip(members, outcomes):
                results[i] = outcome
        return results

    def run_bundle(self, target: Target, members: list[tuple], timeout_s: float) -> list[list[Outcome]]:
        """run_group's answer for each member, a (spec, xs, gs) of one batching group, the
        members whose cases stack into one call running as one worker call (base.BUNDLE; a
        compiled variant compiles one function over them all), with the members' summed
        timeouts. A member whose cases do not stack, and every member of a bundle call that
        crashed, raised or timed out, runs as run_group runs it: a failure stays its own group's."""
        results: list[list[Outcome] | None] = [None] * len(members)
        joined = [i for i, (_, xs, gs) in enumerate(members) if len(_stackable(xs, gs)) == 1]
        if len(joined) > 1 and self._absent(target) is None:
            stacks = [[xs[0] if len(xs) == 1 else np.concatenate(xs) for xs in members[i][1:]] for i in joined]
            reply, fresh = self._ask(target, [members[i][0] for i in joined], [x for x, _ in stacks],
                                     [g for _, g in stacks], timeout_s * len(joined), BUNDLE)
            if isinstance(reply, list) and len(reply) == len(joined):
                for i, outcome, (x, _) in zip(joined, reply, stacks):
                    if outcome.status not in (CRASH, ERROR, TIMEOUT):
                        outcome.info.update(fresh_worker=fresh, call_shape=list(x.shape), bundle=len(joined))
                        results[i] = outcome.split([len(x) for x in members[i][1]])
        return [self.run_group(target, *members[i], timeout_s) if r is None else r for i, r in enumerate(results)]

    def _absent(self, target: Target) -> Outcome | None:
        """Why ``target`` cannot run here (its framework not installed or not starting, no such
        device), or None."""
        desc = self.describe(target.framework, target.variant)
        if desc["status"] != OK:
            return Outcome(desc["status"], message=desc["message"])
        if target.device not in desc["devices"]:
            what = "GPU" if target.device == "gpu" else f"device {target.device!r}"
            return Outcome(NO_DEVICE, message=f"no {what} present for {target.framework}")
        return None

    def _run_stacked(self, target, spec, xs, gs, timeout_s, call) -> list[Outcome]:
        x, g = (xs[0], gs[0]) if len(xs) == 1 else (np.concatenate(xs), np.concatenate(gs))
        outcome = self._call(target, spec, x, g, timeout_s, call.method, call.stacked())
        if len(xs) == 1:
            outcome = self._own_crash(outcome, lambda: self._call(target, spec, x, g, timeout_s, call.method,
                                                                   call.stacked()))
        if outcome.status in (CRASH, ERROR) and len(xs) > 1:
            # One member's input can fail the whole call (a compiled kernel's assertion on an
            # all -inf padded window): each case is rerun on its own, so only the
            # cases that fail by themselves are recorded as failing.
            return [self._alone(target, spec, xi, gi, len(x), timeout_s, call.member(i))
                    for i, (xi, gi) in enumerate(zip(xs, gs))]
        return outcome.split([len(x) for x in xs])

    @staticmethod
    def _own_crash(outcome: Outcome, again) -> Outcome:
        """A worker can die of an earlier call's damage (a kernel that wrote out of bounds and
        corrupted the heap): a crash is the call's own only where the worker was fresh, or
        where a fresh worker (the crash restarted it) crashes on it again."""
        return again() if outcome.status == CRASH and not outcome.info.get("fresh_worker") else outcome

    def _alone(self, target, spec, x, g, planes, timeout_s, call) -> Outcome:
        """``x`` in a call of the group's shape, its own planes repeated to fill it: a compiled
        variant reuses the group's compilation (and kernel choice), and no other case's
        values take part."""
        if len(x) == 0 or len(x) == planes:
            def run():
                return self._call(target, spec, x, g, timeout_s, call.method, call.stacked())
        else:
            reps = -(-planes // len(x))
            def fill(a):
                return np.concatenate([a] * reps)[:planes]

            def run():
                return self._call(target, spec, fill(x), fill(g), timeout_s, call.method,
                                  tuple(map(fill, call.stacked()))).split([len(x), planes - len(x)])[0]
        outcome = self._own_crash(run(), run)
        outcome.info["alone"] = True
        return outcome

    def _call(self, target, spec, x, g, timeout_s, method="run", extra=()) -> Outcome:
        outcome, fresh = self._ask(target, spec, x, g, timeout_s, method, extra)
        outcome.info["fresh_worker"] = fresh
        # Kernels can be chosen by size (XLA CPU's 3-D max pooling stops propagating NaN in
        # the forward once the call is large enough), so each result says what call it came from.
        outcome.info["call_shape"] = list(x.shape)
        return outcome

    def _ask(self, target, spec, x, g, timeout_s, method, extra=()) -> tuple[Outcome | list[Outcome], bool]:
        """The worker's reply (CRASH or TIMEOUT where the worker was lost), and whether the
        worker was fresh: whatever state it is in is then this call's."""
        worker = self._workers[registry.get(target.framework).worker(target.variant).name]
        fresh = not worker.alive or worker.served == 0
        try:
            if not worker.alive:
                worker.start(self.start_timeout_s)
            return worker.run(spec, target.variant, target.device, x, g, timeout_s, method, extra), fresh
        except Lost as lost:
            return Outcome(lost.status, message=lost.message), fresh

    def _start(self, spec: registry.WorkerSpec) -> dict:
        if spec.name not in self._workers:
            self._workers[spec.name] = Worker(spec.name, spec.module, {**self.env, **spec.env})
        worker = self._workers[spec.name]
        try:
            return worker.start(self.start_timeout_s)
        except Lost as lost:
            return {"status": lost.status, "message": lost.message}

    def workers(self) -> dict[str, Worker]:
        """The workers started so far, by worker name (for start counts in benchmarks and tests)."""
        return dict(self._workers)

    def close(self) -> None:
        for worker in self._workers.values():
            worker.hang_up()  # all exit in parallel; framework teardown takes seconds each
        for worker in self._workers.values():
            worker.close()


class _Call:
    """The method of a stacked call and its members' further arrays."""

    def __init__(self, method: str, extras: list[tuple]):
        self.method, self.extras = method, extras

    def stacked(self) -> tuple:
        return tuple(parts[0] if len(parts) == 1 else np.concatenate(parts) for parts in zip(*self.extras))

    def member(self, i: int) -> "_Call":
        return _Call(self.method, [self.extras[i]])


def _stackable(xs, gs) -> list[list[int]]:
    """Indices of cases that can share one call, in first-seen order."""
    groups: dict[tuple, list[int]] = {}
    for i, (x, g) in enumerate(zip(xs, gs)):
        groups.setdefault((x.dtype, x.shape[1:], g.dtype, g.shape[1:]), []).append(i)
    return list(groups.values())
