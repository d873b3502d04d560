"""The worker's side of poolgrad/adapters/worker.py: the entry points of a framework's worker
process and of its zygote, which run in the child and import only the adapter module."""

from __future__ import annotations

import faulthandler
import importlib
import multiprocessing
import multiprocessing.connection
import os
import sys
from multiprocessing import reduction

from .base import BUNDLE, ERROR, METHODS, OK, UNSUPPORTED, Outcome


def _log_to(log_path: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def serve(module: str, conn, log_path: str, env: dict[str, str]) -> None:
    """Child entry point: import the adapter module and answer requests until EOF.

    ``env`` is applied before the import, so thread-pool variables reach the framework.
    """
    os.environ.update(env)
    _log_to(log_path)
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
            # Skip interpreter and framework teardown (seconds for a large framework); nothing is unsaved.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        _reply(conn, _run(adapter, *request))


def zygote(module: str, conn, log_path: str, env: dict[str, str]) -> None:
    """Zygote entry point: import the adapter module, then fork one worker (``serve``) per
    ("fork", log path) request, the worker's end of its pipe following as a passed handle, and
    reap one on ("reap", pid), answering its exit code. EOF: exit."""
    os.environ.update(env)
    _log_to(log_path)
    before = _threads()
    try:
        importlib.import_module(module)
    except Exception as e:
        conn.send(("failed", f"{module} could not start: {type(e).__name__}: {e}"))
        return
    conn.send(("ready", _threads() - before))
    while True:
        try:
            kind, arg = conn.recv()
        except EOFError:
            os._exit(0)
        if kind == "reap":
            conn.send(os.waitstatus_to_exitcode(os.waitpid(arg, 0)[1]))
            continue
        fd = reduction.recv_handle(conn)
        pid = os.fork()
        if pid == 0:
            conn.close()
            serve(module, multiprocessing.connection.Connection(fd), arg, {})
            os._exit(0)
        os.close(fd)
        conn.send(pid)


def _threads() -> int:
    # NumPy's OpenBLAS pool, started before (this module imports NumPy), is fork-safe: it
    # quiesces at fork (pthread_atfork).
    return len(os.listdir("/proc/self/task"))


def _run(adapter, method, spec, variant, device, x, grad_output, *extra) -> Outcome | list[Outcome]:
    fn = getattr(adapter, method, None) if method in METHODS or method == BUNDLE else None
    if fn is None:
        return Outcome(UNSUPPORTED, message=f"the {adapter.framework} adapter has no {method}")
    try:
        return fn(spec, variant, device, x, grad_output, *extra)
    except Exception as e:
        return Outcome(ERROR, message=f"{type(e).__name__}: {e}")


def _reply(conn, outcome: Outcome | list[Outcome]) -> None:
    try:
        conn.send(outcome)
    except Exception as e:  # pickling fails before anything is written, so the pipe stays in step
        conn.send(Outcome(ERROR, message=f"the adapter's result could not be sent back: {type(e).__name__}: {e}"))
