"""The hardware facts that decide ISA-dependent kernel behaviour, as a run records them and
as findings scope on them (cases.findings.Machine)."""

from __future__ import annotations

import functools
import os
import platform
from pathlib import Path

from poolgrad.cases.findings import DISPATCH_FEATURES, Machine, onednn_cap, onednn_state

# oneDNN reads either name; ONEDNN_ wins where both are set.
ISA_CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


@functools.cache
def cpu_name() -> str:
    for line in _cpuinfo():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


@functools.cache
def cpu_features() -> tuple[str, ...]:
    """The instruction-set features pooling kernels dispatch on that this CPU has."""
    flags = set()
    for line in _cpuinfo():
        if line.startswith(("flags", "Features")):
            flags.update(line.split(":", 1)[1].split())
    return tuple(f for f in DISPATCH_FEATURES if f in flags)


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def isa_cap() -> str | None:
    return next((os.environ[v] for v in ISA_CAP_VARIABLES if os.environ.get(v)), None)


def machine(framework: str | None = None, framework_environment: dict | None = None) -> Machine:
    """This machine, with ``framework``'s oneDNN state from what its adapter reported."""
    cap = isa_cap()
    state = onednn_state(framework_environment or {})
    return Machine(frozenset(cpu_features()), None if cap is None else onednn_cap(cap),
                   frozenset() if state is None else frozenset({(framework, state)}))


def record() -> dict:
    """The environment record's fields for the machine."""
    return {"cpu": cpu_name(), "cpu_features": list(cpu_features()), "onednn_max_cpu_isa": isa_cap()}


def completed(env: dict | None, this: dict | None = None) -> dict:
    """A results file's environment record, with ``this`` machine's record (default: this
    machine's) where it says nothing: results written before runs recorded their machine."""
    return {**(record() if this is None else this), **{k: v for k, v in (env or {}).items() if v is not None}}
