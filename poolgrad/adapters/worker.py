"""One framework's worker process, and the parent's handle on it (the child's entry points are in
worker_child.py).

The child inherits no framework state from the parent and imports only its own adapter module.
On Linux it is forked from a *zygote*: a process started with multiprocessing's "spawn"
method that imported the adapter module once (the seconds a large framework takes) and still
runs a single thread, so a fork of it is what a fresh import would give. A worker that a
crashing case killed is then back in milliseconds, not seconds. Elsewhere (no
``os.pidfd_open`` to watch a process that is not one's child) each child is spawned and
imports for itself. Its stdout and stderr (file
descriptors 1 and 2, so native aborts and C++ logs too) go to a temp file, whose tail a crash
message quotes; its name leaves the temp directory once the child has opened it (this process
reads it through a descriptor of its own), so no run leaves one behind, however it ends. Requests and replies are pickled over a multiprocessing Connection; NumPy
arrays, ml_dtypes bfloat16 included, survive the trip unchanged.

Protocol: the child first sends ("ready", description) or ("failed", message); then for each
request tuple (method, spec, variant, device, x, grad_output, *extra) it sends one Outcome of
``adapter.<method>`` (base.METHODS), or a list of them for base.BUNDLE (spec, x and grad_output
lists of the members'). End of the connection tells it to exit.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import tempfile
import time
from multiprocessing import reduction

from .base import CRASH, ERROR, TIMEOUT, Outcome
from .worker_child import serve, zygote

_SPAWN = multiprocessing.get_context("spawn")
_TAIL_CHARS = 2000
# Forking from a zygote needs fork, and pidfd_open to watch a grandchild (Linux 5.3+).
FORKS = hasattr(os, "pidfd_open") and hasattr(os, "fork")


class Lost(Exception):
    """The worker is gone and reaped: it died (CRASH), hung (TIMEOUT) or could not import its
    adapter (ERROR)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class _Spawned:
    """A child process of this one."""

    def __init__(self, target, args: tuple, name: str, daemon: bool = False):
        self._proc = _SPAWN.Process(target=target, args=args, name=name, daemon=daemon)
        self._proc.start()
        self.pid, self.sentinel = self._proc.pid, self._proc.sentinel

    def alive(self) -> bool:
        return self._proc.is_alive()

    def kill(self) -> None:
        self._proc.kill()

    def join(self, timeout_s: float | None) -> int | None:
        """The exit code once the process has ended within ``timeout_s``, else None."""
        self._proc.join(timeout_s)
        return self._proc.exitcode

    def close(self) -> None:
        self._proc.close()


class _Forked:
    """A worker its zygote forked: watched through a pidfd, reaped by the zygote."""

    def __init__(self, zygote: "_Zygote", pid: int):
        self.zygote, self.pid = zygote, pid
        self.sentinel = os.pidfd_open(pid)  # readable once the process has ended
        self._exitcode = None

    def alive(self) -> bool:
        return not multiprocessing.connection.wait([self.sentinel], 0)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def join(self, timeout_s: float | None) -> int | None:
        if self._exitcode is None and multiprocessing.connection.wait([self.sentinel], timeout_s):
            self._exitcode = self.zygote.reap(self.pid)
        return self._exitcode

    def close(self) -> None:
        os.close(self.sentinel)


class _Log:
    """A child's stdout and stderr: a temp file it opens by name (a spawned child inherits no
    descriptor), read here through this process's own descriptor."""

    def __init__(self, name: str):
        self.fd, self.path = tempfile.mkstemp(prefix=f"poolgrad-{name}-", suffix=".log")
        self._named = True

    def opened(self) -> None:
        """The child has the file open (it answered): its name is no longer needed."""
        if self._named:
            os.unlink(self.path)
            self._named = False

    def tail(self, chars: int) -> str:
        size = os.fstat(self.fd).st_size
        return os.pread(self.fd, chars, max(0, size - chars)).decode("utf-8", "replace")

    def close(self) -> None:
        self.opened()
        os.close(self.fd)


class _Zygote:
    """The parent's handle on a zygote (see the module docstring). ``threads``: how many its
    adapter's import started; forking it is safe only when that is none."""

    def __init__(self, name: str, module: str, env: dict[str, str], timeout_s: float):
        self.log = _Log(f"{name}-zygote")
        self._conn, theirs = _SPAWN.Pipe()
        self._proc = _Spawned(zygote, (module, theirs, self.log.path, env), f"poolgrad-{name}-zygote", daemon=True)
        theirs.close()
        ready = multiprocessing.connection.wait([self._conn, self._proc.sentinel], timeout_s)
        reply = ("lost", None)
        if self._conn in ready:
            with contextlib.suppress(EOFError, ConnectionResetError):
                reply = self._conn.recv()
                self.log.opened()
        if reply[0] != "ready":
            if not ready:
                lost = Lost(TIMEOUT, f"exceeded {timeout_s:g} s starting the {name} worker")
            elif reply[0] == "failed":
                lost = Lost(ERROR, reply[1])
            else:
                lost = Lost(CRASH, _died(name, self._proc.join(5), "starting", self.log))
            self.close()
            raise lost
        self.threads = reply[1]

    def alive(self) -> bool:
        return self._proc.alive()

    def fork(self, log_path: str):
        """(the parent's end of the new worker's pipe, the worker)."""
        ours, theirs = _SPAWN.Pipe()
        try:
            self._conn.send(("fork", log_path))
            reduction.send_handle(self._conn, theirs.fileno(), self._proc.pid)
            theirs.close()  # so the worker's death reads as EOF here
            return ours, _Forked(self, self._conn.recv())
        except (OSError, EOFError):  # the zygote is gone
            ours.close()
            theirs.close()
            raise

    def reap(self, pid: int) -> int | None:
        """The worker's exit code; None where the zygote itself is gone (init reaped the
        worker, and its exit status went with it)."""
        try:
            self._conn.send(("reap", pid))
            return self._conn.recv()
        except (EOFError, OSError):
            return None

    def close(self) -> None:
        self._conn.close()  # EOF: the zygote exits
        if self._proc.join(5) is None:
            self._proc.kill()
            self._proc.join(None)
        self._proc.close()
        self.log.close()


class Worker:
    """The parent's handle on one framework's worker process (not thread-safe)."""

    def __init__(self, name: str, module: str, env: dict[str, str] | None = None):
        self.name, self.module, self.env = name, module, dict(env or {})
        self.starts = 0
        self.served = 0  # calls answered since the last start
        self._proc = self._conn = self._log = self._zygote = None
        self._forks = FORKS

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.alive()

    def start(self, timeout_s: float) -> dict:
        """Start the child and return its description (raises Lost if it dies or hangs)."""
        self.stop()
        began = time.perf_counter()
        if self._forks and (self._zygote is None or not self._zygote.alive()):
            self._new_zygote(timeout_s)
        self._log = _Log(self.name)
        try:
            if self._zygote is not None:
                try:
                    self._conn, self._proc = self._zygote.fork(self._log.path)
                except (OSError, EOFError):  # killed after alive() looked: a new zygote forks the worker
                    self._new_zygote(timeout_s)
                    if self._zygote is not None:
                        self._conn, self._proc = self._zygote.fork(self._log.path)
            if self._proc is None:
                self._conn, child_conn = _SPAWN.Pipe()
                self._proc = _Spawned(serve, (self.module, child_conn, self._log.path, self.env), f"poolgrad-{self.name}")
                child_conn.close()  # so the child's death reads as EOF here
        except BaseException:  # no child to stop(): its log goes here
            self._log.close()
            self._log = None
            raise
        self.starts += 1
        self.served = 0
        kind, payload = self._receive(timeout_s, "starting")
        self._log.opened()
        if kind == "failed":
            self.stop()
            raise Lost(ERROR, payload)
        return {**payload, "startup_s": round(time.perf_counter() - began, 3)}

    def _new_zygote(self, timeout_s: float) -> None:
        if self._zygote is not None:  # one that died: reap it, and let its log go
            self._zygote.close()
            self._zygote = None
        self._zygote = _Zygote(self.name, self.module, self.env, timeout_s)
        if self._zygote.threads:  # its import started threads: a fork would copy their locks
            self._zygote.close()
            self._zygote, self._forks = None, False

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
            message = _died(self.name, self._proc.join(5), doing, self._log)
        self.stop()
        return Lost(status, message)

    def hang_up(self) -> None:
        """Close the pipe: the child exits on EOF (lets several workers exit at once)."""
        if self._conn is not None:
            self._conn.close()

    def stop(self) -> None:
        """Hang up, reap the child (killing it after 5 s) and drop its log."""
        if self._proc is None:
            return
        self.hang_up()
        if self._proc.join(5) is None:
            self._proc.kill()
            self._proc.join(None)
        self._proc.close()
        self._log.close()
        self._proc = self._conn = self._log = None

    def close(self) -> None:
        """Stop the child and its zygote."""
        self.stop()
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None


def _died(name: str, code: int | None, doing: str, log: _Log) -> str:
    """A crash message: how the process ended, and the tail of its stderr with faulthandler's
    stacks cut to their innermost frames (whole, they are long with the checkout's path and
    pushed what killed the process, glibc's "free(): invalid pointer", out of the tail)."""
    tail = _innermost_frames(log.tail(16 * _TAIL_CHARS))[-_TAIL_CHARS:].strip()
    return f"the {name} worker died ({_describe_exit(code)}) {doing}" + (f"; its stderr ended with:\n{tail}" if tail else "")


def _innermost_frames(text: str, keep: int = 5) -> str:
    """``text`` with each of faulthandler's stacks cut to its ``keep`` innermost frames (where
    the framework and its adapter were), and without its list of extension modules."""
    kept, depth = [], 0
    for line in text.splitlines():
        depth = depth + 1 if line.startswith('  File "') else 0
        if depth <= keep and not line.startswith("Extension modules:"):
            kept.append(line)
    return "\n".join(kept)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
