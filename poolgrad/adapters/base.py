"""The one interface every framework adapter implements.

A *target* is (framework, variant, device). An adapter module (``poolgrad/adapters/<fw>/adapter.py``)
exposes a module-level ``ADAPTER`` object with the attributes and methods of :class:`Adapter`.
Adapters run *inside* a framework worker process (see ``poolgrad/adapters/worker.py``); only that
process imports the framework.

``run`` takes a batch: ``x`` of shape (N, C, *spatial) in canonical channels-first layout and
``grad_output`` of the forward output's shape, both NumPy arrays of the case dtype (ml_dtypes
bfloat16 for bfloat16). It returns an :class:`Outcome` whose arrays are channels-first NumPy
arrays of the framework's own output dtype, exactly as the framework produced them: an adapter
transposes layouts and converts containers, and never "fixes" a value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

# Outcome statuses produced by adapters and the worker pool.
OK = "ok"
UNSUPPORTED = "unsupported"   # not expressible in this API path (message says why)
ERROR = "error"               # the framework raised; message is its exception
CRASH = "crash"               # the worker process died (abort, segfault); message has what was captured
TIMEOUT = "timeout"           # the worker exceeded the per-call timeout and was restarted
NOT_INSTALLED = "not_installed"
NO_DEVICE = "no_device"       # e.g. gpu target on a machine without a GPU
STATUSES = (OK, UNSUPPORTED, ERROR, CRASH, TIMEOUT, NOT_INSTALLED, NO_DEVICE)


@dataclasses.dataclass(frozen=True, order=True)
class Target:
    framework: str   # a registered framework's name
    variant: str     # e.g. "eager", "compile", "xla"
    device: str      # "cpu" | "gpu"

    @property
    def id(self) -> str:
        return f"{self.framework}-{self.variant}-{self.device}"

    def rerun_args(self, test_name: str) -> list[str]:
        """The command that runs test ``test_name`` (its case and draws) on this target alone,
        under default options (the reports give it for a result: the record has no run options)."""
        from .user_adapter import FRAMEWORK as USER
        if self.framework == USER:
            module, function = self.variant.rsplit(".", 1)
            where = ["--target", f"{module}:{function}"]
        else:
            where = ["--frameworks", self.framework, "--variants", self.variant, "--devices", self.device]
        return ["pytest", "--pyargs", "poolgrad", "-k", test_name, *where]


@dataclasses.dataclass(frozen=True, eq=False)
class Plan:
    """What a framework's ``plan(spec, variant, shape)`` returns for a call it can make (else
    :class:`Unsupported`): the call its adapter makes and its reproducer templates write. A
    planner's own call types are frozen dataclasses deriving from it, equal by their fields; a
    call of one function of keyword arguments is :class:`Keywords`."""


@dataclasses.dataclass(frozen=True, eq=False)
class Keywords(Plan, Mapping):
    """A call's keyword arguments, read as a mapping (``fn(x, **kw)``, ``kw["kernel_size"]``,
    a template's ``call.kernel_size``) and equal to a mapping of the same items; ``kwargs`` is
    the dict (a reproducer writes its repr)."""

    kwargs: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.kwargs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.kwargs)

    def __len__(self) -> int:
        return len(self.kwargs)


@dataclasses.dataclass(frozen=True)
class Unsupported:
    """What a framework's ``plan`` returns for a spec its API path has no arguments for."""

    reason: str


@dataclasses.dataclass
class Outcome:
    status: str
    forward: np.ndarray | None = None      # (N, C, *out), channels-first
    grad_input: np.ndarray | None = None   # (N, C, *spatial), channels-first
    indices: np.ndarray | None = None      # return_indices / argmax output where the path has one,
                                           # as the framework defines it (documented per adapter)
    message: str = ""
    info: dict[str, Any] = dataclasses.field(default_factory=dict)  # e.g. device name, compile count
    # AD modes (the optional ``jvp`` / ``double_backward`` methods below):
    tangent_output: np.ndarray | None = None    # (N, C, *out): forward-mode derivative along the tangent
    grad_grad_output: np.ndarray | None = None  # (N, C, *out): d/d grad_output of sum(grad_input * v)
    grad_grad_input: np.ndarray | None = None   # (N, C, *spatial): d/d input of sum(grad_input * v)

    @property
    def ran(self) -> bool:
        """The call ran: the arrays are the framework's answer (status OK)."""
        return self.status == OK

    def split(self, sizes: list[int]) -> list["Outcome"]:
        """Split a batched outcome back into per-case outcomes along N (a call of one case keeps
        its arrays whole: a RoI case's output has a row per box, not per plane)."""
        if self.status != OK or len(sizes) == 1:
            return [dataclasses.replace(self) for _ in sizes]
        bounds = np.cumsum([0, *sizes])
        return [dataclasses.replace(self, **{name: getattr(self, name)[bounds[i]:bounds[i + 1]]
                                             for name in ARRAY_FIELDS if getattr(self, name) is not None})
                for i in range(len(sizes))]


ARRAY_FIELDS = ("forward", "grad_input", "indices", "tangent_output", "grad_grad_output", "grad_grad_input")
# The adapter methods a worker can be asked to run, with the arrays each takes after x and
# grad_output; "run" is required, the AD modes are optional (absent: unsupported).
METHODS = {"run": (), "jvp": ("tangent",), "double_backward": ("v",)}
# The method of a variant its framework bundles (Framework.bundles): ``run_bundle(specs,
# variant, device, xs, grad_outputs)`` is ``run`` of each member (a spec, its x and
# grad_output) in one call, answering a list of one Outcome per member.
BUNDLE = "run_bundle"


class Adapter:
    """What an adapter module's ``ADAPTER`` provides (duck-typed; subclassing is optional).

    Optional AD modes (an adapter without one answers UNSUPPORTED for it; a framework whose
    API takes the call but has no derivative rule for the mode answers ERROR with its own
    message, as a missing kernel does in reverse mode). ``tangent``
    and ``v`` have x's shape and dtype and come from the case, like grad_output:

    ``jvp(spec, variant, device, x, grad_output, tangent) -> Outcome``: forward,
    tangent_output (forward mode along ``tangent``) and grad_input (reverse mode of the same
    function, so the two modes are compared within one call).

    ``double_backward(spec, variant, device, x, grad_output, v) -> Outcome``: grad_input, and
    the gradients of sum(grad_input * v), the backward built differentiably, with respect to
    grad_output (grad_grad_output) and to x (grad_grad_input).
    """

    framework: str
    variants: tuple[str, ...]

    def version(self) -> str:
        """The framework's version string (its module's ``__version__``)."""
        raise NotImplementedError

    def devices(self) -> list[str]:
        """Devices present on this machine for this framework: a subset of ["cpu", "gpu"]."""
        raise NotImplementedError

    def environment(self) -> dict[str, Any]:
        """Versions and switches that change pooling behaviour (CUDA/cuDNN, device names, flags)."""
        raise NotImplementedError

    def run(self, spec, variant: str, device: str, x: np.ndarray, grad_output: np.ndarray) -> Outcome:
        """Forward and dX for L = sum(forward(x) * grad_output), or unsupported/error."""
        raise NotImplementedError


class ModeMethods:
    """``run``, ``jvp`` and ``double_backward`` (see :class:`Adapter`) as one call each of the
    adapter's own ``_mode(method, spec, variant, device, x, grad_output, *extra)``: ``method``
    is the key of METHODS, ``extra`` the arrays it lists."""

    def run(self, spec, variant, device, x, grad_output) -> Outcome:
        return self._mode("run", spec, variant, device, x, grad_output)

    def jvp(self, spec, variant, device, x, grad_output, tangent) -> Outcome:
        return self._mode("jvp", spec, variant, device, x, grad_output, tangent)

    def double_backward(self, spec, variant, device, x, grad_output, v) -> Outcome:
        return self._mode("double_backward", spec, variant, device, x, grad_output, v)

