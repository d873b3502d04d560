"""The hardware facts that decide ISA-dependent kernel behaviour, as a run records them and
as findings scope on them (knowledge.machine.Machine)."""

from __future__ import annotations

import functools
import os
import platform
from pathlib import Path

from poolgrad.adapters import registry
from poolgrad.knowledge.machine import Machine

# The CPU features poolgrad records: the ones x86 and Arm kernels dispatch pooling code on.
DISPATCH_FEATURES = ("sse4_1", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx_ne_convert", "avx512f", "avx512bw", "avx512vl",
                     "avx512dq", "avx512cd", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
                     "amx_bf16", "amx_int8", "amx_fp16", "asimd", "sve", "bf16")


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


def machine(framework: str, framework_environment: dict | None = None) -> Machine:
    """This machine, in this process's environment, with what ``framework``'s adapter reported
    of its own."""
    environment = registry.declared(framework).dispatch_environment(os.environ, framework_environment or {})
    return Machine.of(cpu_features(), {framework: environment})


def record() -> dict:
    """The environment record's fields for the machine."""
    return {"cpu": cpu_name(), "cpu_features": list(cpu_features())}


def completed(env: dict | None, this: dict | None = None) -> dict:
    """A results file's environment record, with ``this`` machine's record (default: this
    machine's) where it says nothing: results written before runs recorded their machine."""
    return {**(record() if this is None else this), **{k: v for k, v in (env or {}).items() if v is not None}}
