"""A stand-in framework for the pool's own tests: computes with the reference, and misbehaves
on purpose when the input holds a sentinel value, so tests can show a worker's abort, hang or
segfault stays in its process. It is not a framework under test and is not in the registry.
"""

from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from poolgrad import reference
from .base import OK, Adapter, Outcome

ABORT, HANG, RAISE, SEGFAULT = 1234.5, 2345.5, 3456.5, 4567.5
# Runs normally but damages the process, so that its next call aborts whatever it computes (a
# kernel that wrote out of bounds, whose damage shows later).
POISON = 5678.5
IMPORTED_BY = os.getpid()  # a worker forked from a zygote did not import this module itself


class FakeAdapter(Adapter):
    framework = "fake"
    variants = ("eager", "compiled")

    def __init__(self):
        self.calls = 0  # lets tests count worker calls (one per stacked group)
        self.poisoned = False

    def version(self) -> str:
        return "0.0"

    def devices(self) -> list[str]:
        return ["cpu"]

    def environment(self) -> dict:
        return {"pid": os.getpid(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}

    def run(self, spec, variant, device, x, grad_output) -> Outcome:
        self.calls += 1
        return self._computed(spec, x, grad_output)

    def run_bundle(self, specs, variant, device, xs, grad_outputs) -> list[Outcome]:
        """Every member's ``run`` in one call, which any member's sentinel fails (as one
        compiled function over them all would)."""
        self.calls += 1
        return [self._computed(*member) for member in zip(specs, xs, grad_outputs)]

    def _computed(self, spec, x, grad_output) -> Outcome:
        values = x.astype(np.float64)
        if self.poisoned or (values == ABORT).any():
            os.abort()
        if (values == SEGFAULT).any():
            ctypes.string_at(0)
        if (values == HANG).any():
            while True:
                time.sleep(60)
        if (values == RAISE).any():
            raise ValueError("fake framework refuses the sentinel input")
        self.poisoned = bool((values == POISON).any())
        return Outcome(OK, forward=reference.forward(spec, x), grad_input=reference.backward(spec, x, grad_output),
                       info={"calls": self.calls, "pid": os.getpid(), "imported_by": IMPORTED_BY})


ADAPTER = FakeAdapter()
