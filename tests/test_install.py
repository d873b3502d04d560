"""A first install works as written: every module the packages import is declared by their
distribution, the release lanes list with nox alone, naming a framework that is not installed is
a usage error, --help names what is installed, and a worker leaves no file behind."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from poolgrad.adapters import registry
from poolgrad.adapters.base import Target
from poolgrad.adapters.fake_adapter import ABORT
from poolgrad.adapters.worker import Lost, Worker
from poolgrad.knowledge import sources
from poolgrad.reference import PoolSpec
from poolgrad.suite.plugin import summary

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))
DISTRIBUTIONS = [ROOT, *PLUGINS]
# Maintainers' tools inside the package, and the extra that declares what they import.
TOOLS = {"poolgrad/cases/coverage.py": "dev"}


def _project(root: Path) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]


def _packages(root: Path) -> list[Path]:
    return [p.parent for p in root.glob("*/__init__.py") if p.parent.name.startswith("poolgrad")]


def _imports(path: Path) -> set[str]:
    """Top-level names of the absolute imports of a module, at any depth (lazy imports too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _worker_modules() -> set[str]:
    """The adapter modules: imported only in a framework's worker, where its framework is (a
    subpackage's ``adapter`` too, which its framework's adapter runs: tensorflow/crop_and_resize)."""
    registered = {w.module for f in registry.FRAMEWORKS.values() for w in [f.worker(), *f.workers.values()]}
    nested = {f"{w.removesuffix('.adapter')}.{p.parent.name}.adapter" for w in registered if w.endswith(".adapter")
              for p in Path(importlib.util.find_spec(w).origin).parent.glob("*/adapter.py")}
    return registered | nested


def _frameworks() -> set[str]:
    """What a framework's worker needs importable: optional by design (extras, or nothing)."""
    return {m for f in registry.FRAMEWORKS.values() for w in [f.worker(), *f.workers.values()]
            for m in (f.import_name, w.requires)}


def _declared(requirements) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


@pytest.mark.parametrize("root", DISTRIBUTIONS, ids=lambda p: p.name)
def test_every_imported_module_is_declared(root):
    """A module imported outside the adapter modules (where the framework is) comes from a
    required distribution, or a maintainers' tool's from its extra; an adapter module's own
    framework needs no declaration (frameworks are optional by design), and what else it
    imports comes from a required distribution or an extra (flax, jaxlib with [jax])."""
    project = _project(root)
    required = _declared(project.get("dependencies", ()))
    extras = {k: _declared(v) for k, v in project.get("optional-dependencies", {}).items()}
    providers = importlib.metadata.packages_distributions()
    own = {p.name for p in _packages(root)} | set(sys.stdlib_module_names)
    workers, frameworks = _worker_modules(), _frameworks()
    undeclared = []
    for package in _packages(root):
        for path in package.rglob("*.py"):
            rel = path.relative_to(root).as_posix()
            module = rel.removesuffix(".py").replace("/", ".")
            for name in sorted(_imports(path) - own):
                if module in workers and name in frameworks:
                    continue  # the framework itself: optional by design
                dists = {canonicalize_name(d) for d in providers.get(name, ())}
                assert dists, f"{rel}: imports {name}, which no installed distribution provides"
                # an adapter module: what it needs beside its framework comes with the framework's extra
                allowed = (required.union(*extras.values()) if module in workers
                           else required | extras[TOOLS[rel]] if rel in TOOLS else required)
                if not dists & allowed:
                    undeclared.append(f"{rel}: {name} ({', '.join(sorted(dists))})")
    assert not undeclared, f"{root.name}/pyproject.toml does not declare: {undeclared}"


def test_the_known_plugins_are_the_repositorys_plugins():
    """registry.PLUGINS (what `--frameworks paddle` says to install where its plugin is not)
    names each plugin distribution of plugins/ and the framework its entry point registers."""
    found = {name: _project(p)["name"] for p in PLUGINS
             for name in tomllib.loads((p / "pyproject.toml").read_text())["project"]["entry-points"]["poolgrad.adapters"]}
    assert registry.PLUGINS == found


@pytest.mark.parametrize("noxfile", [ROOT / "noxfile.py", *(p / "noxfile.py" for p in PLUGINS)],
                         ids=lambda p: p.parent.name)
def test_nox_lists_the_lanes_without_poolgrad_installed(noxfile, tmp_path):
    """nox installed alone (its site-packages without this environment's .pth files, so no
    editable poolgrad) lists each noxfile's lanes, from any directory."""
    nox = pytest.importorskip("nox", reason="needs nox (the dev extra)")
    env = {"PYTHONPATH": str(Path(nox.__file__).parents[1]), "PATH": "/usr/bin:/bin"}
    probe = subprocess.run([sys.executable, "-S", "-c", "import importlib.util as u; print(u.find_spec('poolgrad'))"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert probe.stdout.strip() == "None", probe.stdout + probe.stderr  # poolgrad really is absent
    run = subprocess.run([sys.executable, "-S", "-m", "nox", "-f", str(noxfile), "-l"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^\* lane\(", run.stdout, re.M), run.stdout


# A registered framework that is not installed, for the runs below (every real one is installed
# in this project's environment).
ABSENT = """from poolgrad.adapters import registry
from poolgrad.adapters.base import Target
registry.FRAMEWORKS["absent"] = registry.Framework(
    "absent", "poolgrad.adapters.fake_adapter", "poolgrad_no_such_module", ("poolgrad-no-such-dist",), ("eager",))
"""


def _poolgrad(tmp_path, *args):
    """The poolgrad command (which imports poolgrad before pytest starts), knowing ABSENT."""
    (tmp_path / "absent_framework.py").write_text(ABSENT)
    return subprocess.run([sys.executable, "-m", "poolgrad.cli", "-p", "absent_framework", "-p", "no:xdist", *args],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)},
                          capture_output=True, text=True, timeout=120)


def test_naming_a_framework_that_is_not_installed_is_a_one_line_usage_error(tmp_path):
    run = _poolgrad(tmp_path, "--frameworks", "absent")
    installed = ", ".join(f for f in registry.FRAMEWORKS if registry.installed(f))
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert not run.stdout and run.stderr.strip().splitlines() == [
        f"ERROR: --frameworks: absent is not installed here (install poolgrad-no-such-dist); installed: {installed}. "
        "--allow-missing-frameworks skips their targets instead"]


def test_a_plain_run_prints_no_warning_and_a_summary_for_its_user(tmp_path):
    """The catalogue is built (reference sums that overflow to inf included), the targets of a
    framework allowed to be missing are skipped, nothing warns, and the knowledge-base audit
    waits for --audit-findings."""
    run = _poolgrad(tmp_path, "--frameworks", "absent", "--allow-missing-frameworks", "-k", "max_pool1d and ties_window")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr
    assert "warning" not in (run.stdout + run.stderr).lower(), run.stdout[-3000:] + run.stderr
    assert re.search(r"^results on absent: 0 .*^skipped: (\d+) \(not_installed: \1\)$", run.stdout, re.M | re.S), run.stdout[-2000:]
    assert "audit" not in run.stdout
    audited = _poolgrad(tmp_path, "--example", "mlx-max-grad-split", "--frameworks", "absent",
                        "--allow-missing-frameworks", "--audit-findings")
    assert re.search(r"^knowledge-base audit:\n  stale .*\n  did not hold .*", audited.stdout, re.M), audited.stdout[-2000:]


def test_pytest_marks_the_imported_package_for_rewriting_without_a_warning(pytestconfig, monkeypatch):
    """What pytest does to an installed (not editable) plugin's package: the poolgrad command
    imported it before, which warns unless the package module opts out (PYTEST_DONT_REWRITE)."""
    from _pytest.assertion.rewrite import AssertionRewritingHook
    warned = []
    monkeypatch.setattr(pytestconfig, "issue_config_time_warning", lambda w, stacklevel: warned.append(str(w)))
    assert "poolgrad" in sys.modules
    AssertionRewritingHook(pytestconfig).mark_rewrite("poolgrad")
    assert warned == []


def test_the_summary_names_the_findings_hit_worst_impact_first():
    kb = sources.load()
    crash = next(f for f in kb if f.impact == "crash")
    tie = next(f for f in kb if f.impact == "valid_subgradient")
    counts = {("pass", "conforms"): 5, ("expected", "policy"): 7, ("fail", "wrong"): 2, ("skipped", "unsupported"): 3}
    lines = summary(counts, {tie.id: 6, crash.id: 1}, kb, [Target("torch", "eager", "cpu")])
    assert lines[:3] == [
        "results on torch: 14 (conform to the spec: 5, known behaviours, explained by findings: 7, unexplained: 2)",
        "  unexplained: 2 differ from the spec with no finding to explain them, 0 differ from what their finding "
        "says; each failed test above names its case and the command that reruns it",
        "skipped: 3 (unsupported: 3)"]
    assert lines[4:] == [f"       1  crash              {crash.id}: {crash.title}",
                         f"       6  valid_subgradient  {tie.id}: {tie.title}"]


def test_help_names_the_installed_frameworks_and_the_known_ones_that_are_not(tmp_path):
    text = " ".join(_poolgrad(tmp_path, "--help").stdout.split())
    installed = ", ".join(f for f in registry.FRAMEWORKS if registry.installed(f))
    absent = ", ".join(f for f in registry.FRAMEWORKS if not registry.installed(f))  # ABSENT's last
    assert f"Installed here: {installed}; not installed: {absent}" in text


def test_a_worker_leaves_no_file_behind_and_its_crash_message_quotes_its_log(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spec = PoolSpec.from_dict({"op": "max_pool2d", "kernel_size": 2})
    x = np.full((1, 1, 4, 4), ABORT, np.float32)
    worker = Worker("fake", "poolgrad.adapters.fake_adapter")
    try:
        worker.start(60)
        assert list(tmp_path.iterdir()) == []  # running, its log has no name left
        with pytest.raises(Lost) as lost:
            worker.run(spec, "eager", "cpu", x, np.ones((1, 1, 2, 2), np.float32), 30)
        assert "killed by SIGABRT" in lost.value.message and "Fatal Python error: Aborted" in lost.value.message
        worker.start(60)
    finally:
        worker.close()
    assert list(tmp_path.iterdir()) == []
