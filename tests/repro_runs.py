"""Running reproducer scripts as their users do, with the framework imported once.

A reproducer is standalone: it must run with nothing of poolgrad importable. ``run_alone`` runs
one exactly as a user would (``python repro.py`` beside it). ``run_together`` runs several in one
fresh interpreter, this file as its driver, so that their framework is imported once (seconds
each): each script runs as ``__main__`` (runpy) with its own argv, sys.path[0], output and exit
status, and any import of poolgrad fails there as it would where poolgrad is not installed.

    python repro_runs.py RESULTS.json SCRIPT...   (the driver: writes each script's outcome)
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.abc
import io
import json
import os
import runpy
import subprocess
import sys
import traceback
from pathlib import Path

TIMEOUT_S = 300


@dataclasses.dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str
    raised: str | None = None  # run_together's: the exception that ended the script (its type's name)


def run_alone(path: Path) -> Ran:
    out = subprocess.run([sys.executable, str(path)], cwd=path.parent, capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    return Ran(out.returncode, out.stdout, out.stderr)


def run_together(paths: list[Path]) -> list[Ran]:
    """Each script's outcome, as ``run_alone`` would give it; the scripts share one directory, away
    from the checkout, the driver's working directory."""
    cwd = paths[0].parent
    results = cwd / "ran_together.json"
    driver = subprocess.run([sys.executable, __file__, str(results), *map(str, paths)], cwd=cwd,
                            capture_output=True, text=True, timeout=TIMEOUT_S * len(paths))
    assert driver.returncode == 0, driver.stdout[-2000:] + driver.stderr[-2000:]
    return [Ran(**ran) for ran in json.loads(results.read_text())]


def _is_poolgrad(name: str) -> bool:
    return name.partition(".")[0] == "poolgrad" or name.startswith("poolgrad_")


class _NoPoolgrad(importlib.abc.MetaPathFinder):
    """poolgrad (and its plugins) as if not installed: this interpreter has them (editable)."""

    def find_spec(self, name, path=None, target=None):
        if _is_poolgrad(name):
            raise ModuleNotFoundError(f"No module named {name!r} (a reproducer runs without poolgrad)", name=name)
        return None


def _exit_status(code) -> int:
    """The exit status of ``sys.exit(code)``, as the interpreter sets it."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


def _run(script: str) -> dict:
    sys.argv = [script]
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python script` sets it
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        raised = None
        try:
            runpy.run_path(script, run_name="__main__")
            status = 0
        except SystemExit as e:
            status = _exit_status(e.code)
        except BaseException as e:  # an uncaught exception: traceback and status 1, as the interpreter does
            traceback.print_exc()
            status, raised = 1, type(e).__name__
    return {"returncode": status, "stdout": out.getvalue(), "stderr": err.getvalue(), "raised": raised}


def main(results: str, *scripts: str) -> None:
    sys.meta_path.insert(0, _NoPoolgrad())
    ran = [_run(script) for script in scripts]
    imported = sorted(name for name in sys.modules if _is_poolgrad(name))
    assert not imported, f"poolgrad was imported: {imported}"
    Path(results).write_text(json.dumps(ran))


if __name__ == "__main__":
    main(*sys.argv[1:])
