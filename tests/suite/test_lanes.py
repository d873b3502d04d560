"""The release lane runner every noxfile calls (poolgrad/suite/lanes.py): it installs copies,
runs the installed poolgrad from a directory of its own, and refuses an incomplete results file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from poolgrad.suite import lanes


class Session:
    """What a lane uses of a nox session; ``run`` writes the results a pytest run would."""

    def __init__(self, tmp: Path, targets: list):
        self.tmp, self.targets, self.posargs = tmp, targets, ["-k", "max_pool1d"]
        self.installed, self.ran, self.cwd, self.logged = [], [], None, []

    def create_tmp(self):
        self.tmp.mkdir(exist_ok=True)
        return str(self.tmp)

    def install(self, *args):
        self.installed.extend(args)

    def chdir(self, path):
        self.cwd = Path(path)

    def run(self, *args, env=None, success_codes=()):
        self.ran.append(args)
        results = Path(args[args.index("--results") + 1])
        # targets by text id, as the writer names them
        lines = [{"record": "text", "id": i, "text": t} for i, t in enumerate(self.targets)]
        lines += [{"case_id": 0, "target": i, "verdict": i} for i in range(len(self.targets))]
        results.write_text("\n".join(json.dumps(r) for r in [*lines, {"record": "environment"}]) + "\n")

    def error(self, message):
        raise RuntimeError(message)

    def log(self, message):
        self.logged.append(message)


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "poolgrad").mkdir(parents=True)
    (root / "poolgrad" / "__init__.py").write_text("")
    (root / ".venv").mkdir()
    (root / "plugins" / "p").mkdir(parents=True)
    return root


def test_a_lane_installs_copies_and_runs_the_installed_suite_from_elsewhere(tmp_path):
    root = _checkout(tmp_path)
    session = Session(tmp_path / "tmp", ["jax-eager-cpu", "jax-jit-cpu"])
    results = lanes.run(session, root, "jax-0.9.2", "jax", "eager,jit", ["jax==0.9.2"], findings=("own.toml",))
    assert results == root / "out" / "lanes" / "jax-0.9.2.jsonl"
    copy = Path(session.installed[1])
    assert copy.parent == session.tmp and (copy / "poolgrad").is_dir() and not (copy / ".venv").exists()
    assert not (copy / "plugins").exists() and session.installed[-1] == "jax==0.9.2"
    args = session.ran[0]
    assert session.cwd == session.tmp and args[:3] == ("pytest", "--pyargs", "poolgrad.conformance")
    assert args[args.index("--variants") + 1] == "eager,jit" and ("--findings", "own.toml") == args[-4:-2]
    assert args[-2:] == ("-k", "max_pool1d")


def test_a_lane_missing_a_variant_is_an_error_naming_it(tmp_path):
    session = Session(tmp_path / "tmp", ["jax-eager-cpu"])
    with pytest.raises(RuntimeError, match=r"no records for \['jit'\]"):
        lanes.run(session, _checkout(tmp_path), "jax-0.9.2", "jax", "eager,jit", ["jax==0.9.2"])
