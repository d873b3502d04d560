"""One framework's worker process, and the parent's handle on it.

The child is started with multiprocessing's "spawn" method, so it inherits no framework state
from the parent, and imports only its own adapter module. Its stdout and stderr (file
descriptors 1 and 2, so native aborts and C++ logs too) go to a temp file, whose tail a crash
message quotes. Requests and replies are pickled over a multiprocessing Connection; NumPy
arrays, ml_dtypes bfloat16 included, survive the trip unchanged.

Protocol: the child first sends ("ready", description) or ("failed", message); then for each
request tuple (method, spec, variant, device, x, grad_output, *extra) it sends one Outcome of
``adapter.<method>`` (base.METHODS). End of the connection tells it to exit.
"""

from __future__ import annotations

import faulthandler
import importlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import time

from .base import CRASH, ERROR, METHODS, OK, TIMEOUT, UNSUPPORTED, Outcome

_SPAWN = multiprocessing.get_context("spawn")
_TAIL_CHARS = 2000


def serve(module: str, conn, log_path: str, env: dict[str, str]) -> None:
    """Child entry point: import the adapter module and answer requests until EOF.

    ``env`` is applied before the import, so thread-pool variables reach the framework.
    """
    os.environ.update(env)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    faulthandler.enable()  # a segfault then leaves a Python traceback in the log
    try:
        adapter = importlib.import_module(module).ADAPTER
        conn.send(("ready", {"status": OK, "message": "", "version": adapter.version(),
                             "devices": list(adapter.devices()), "variants": list(adapter.variants),
                             "environment": adapter.environment()}))
    except Exception as e:
        conn.send(("failed", f"{module} could not start: {type(e).__name__}: {e}"))
        return
    while True:
        try:
            request = conn.recv()
        except EOFError:
            # Skip interpreter and framework teardown (seconds for TensorFlow); nothing is unsaved.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        _reply(conn, _run(adapter, *request))


def _run(adapter, method, spec, variant, device, x, grad_output, *extra) -> Outcome:
    fn = getattr(adapter, method, None) if method in METHODS else None
    if fn is None:
        return Outcome(UNSUPPORTED, message=f"the {adapter.framework} adapter has no {method}")
    try:
        return fn(spec, variant, device, x, grad_output, *extra)
    except Exception as e:
        return Outcome(ERROR, message=f"{type(e).__name__}: {e}")


def _reply(conn, outcome: Outcome) -> None:
    try:
        conn.send(outcome)
    except Exception as e:  # pickling fails before anything is written, so the pipe stays in step
        conn.send(Outcome(ERROR, message=f"the adapter's result could not be sent back: {type(e).__name__}: {e}"))


class Lost(Exception):
    """The worker is gone and reaped: it died (CRASH), hung (TIMEOUT) or could not import its
    adapter (ERROR)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class Worker:
    """The parent's handle on one framework's worker process (not thread-safe)."""

    def __init__(self, name: str, module: str, env: dict[str, str] | None = None):
        self.name, self.module, self.env = name, module, dict(env or {})
        self.starts = 0
        self.served = 0  # calls answered since the last start
        self._proc = self._conn = self._log_path = None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def start(self, timeout_s: float) -> dict:
        """Spawn the child and return its description (raises Lost if it dies or hangs)."""
        self.stop()
        fd, self._log_path = tempfile.mkstemp(prefix=f"poolgrad-{self.name}-", suffix=".log")
        os.close(fd)
        began = time.perf_counter()
        self._conn, child_conn = _SPAWN.Pipe()
        self._proc = _SPAWN.Process(target=serve, args=(self.module, child_conn, self._log_path, self.env),
                                    name=f"poolgrad-{self.name}")
        self._proc.start()
        child_conn.close()  # so the child's death reads as EOF here
        self.starts += 1
        self.served = 0
        kind, payload = self._receive(timeout_s, "starting")
        if kind == "failed":
            self.stop()
            raise Lost(ERROR, payload)
        return {**payload, "startup_s": round(time.perf_counter() - began, 3)}

    def run(self, spec, variant, device, x, grad_output, timeout_s: float, method: str = "run",
            extra: tuple = ()) -> Outcome:
        try:
            self._conn.send((method, spec, variant, device, x, grad_output, *extra))
        except (BrokenPipeError, ConnectionResetError):
            raise self._lose(CRASH, f"running {variant}/{device}")
        outcome = self._receive(timeout_s, f"running {variant}/{device}")
        self.served += 1
        return outcome

    def _receive(self, timeout_s: float, doing: str):
        ready = multiprocessing.connection.wait([self._conn, self._proc.sentinel], timeout_s)
        if not ready:
            raise self._lose(TIMEOUT, f"exceeded {timeout_s:g} s {doing} in the {self.name} worker")
        if self._conn in ready:
            try:
                return self._conn.recv()
            except (EOFError, ConnectionResetError):  # a child that dies mid-answer may reset the pipe
                pass
        raise self._lose(CRASH, doing)

    def _lose(self, status: str, doing: str) -> Lost:
        if status == TIMEOUT:
            self._proc.kill()
            message = doing
        else:
            self._proc.join(5)
            message = f"the {self.name} worker died ({_describe_exit(self._proc.exitcode)}) {doing}"
            tail = self._log_tail()
            if tail:
                message += f"; its stderr ended with:\n{tail}"
        self.stop()
        return Lost(status, message)

    def _log_tail(self) -> str:
        with open(self._log_path, "rb") as f:
            f.seek(max(0, os.path.getsize(self._log_path) - _TAIL_CHARS))
            return f.read().decode("utf-8", "replace").strip()

    def hang_up(self) -> None:
        """Close the pipe: the child exits on EOF (lets several workers exit at once)."""
        if self._conn is not None:
            self._conn.close()

    def stop(self) -> None:
        """Hang up, reap the child (killing it after 5 s) and drop its log."""
        if self._proc is None:
            return
        self.hang_up()
        self._proc.join(5)
        if self._proc.exitcode is None:
            self._proc.kill()
            self._proc.join()
        self._proc.close()
        os.unlink(self._log_path)
        self._proc = self._conn = self._log_path = None


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
