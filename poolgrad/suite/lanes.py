"""A release lane: poolgrad's catalogue against one framework release, in a fresh virtualenv.

Every noxfile's ``lane`` session (poolgrad's own at the checkout's root, each plugin's in its
directory) calls :func:`run`: it installs poolgrad (and a plugin) from copies of their trees, so
building writes nothing (build/, *.egg-info) into the checkout, plus exactly one release; runs
the framework's CPU catalogue from a directory of its own, so pytest imports the installed
poolgrad and not the checkout's; and insists on a complete results file. Failing checks are
expected (pytest exit 1 counts as success): the results file is the product, read by
``python -m poolgrad.suite.history build out/lanes/*.jsonl``. Its compilers start from empty
caches unless ``POOLGRAD_LANE_CACHE`` names a directory to keep them in (--compile-cache).

``session`` is a nox session; this module does not import nox (a lane needs it, a run does not).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

_NOT_SOURCES = (".git", ".venv", ".nox", "out", "plugins", "build", "*.egg-info", "__pycache__", ".hypothesis")


def run(session, root: Path, lane: str, framework: str, variants: str, requirements: list[str], *,
        plugin: Path | None = None, findings: tuple[str, ...] = (), env: dict | None = None) -> Path:
    """Run ``lane``: ``framework``'s ``variants`` (comma list) on CPU with ``requirements``
    installed, poolgrad from the checkout ``root``; ``plugin``: the plugin's directory, installed
    beside it; ``findings``: further findings files (a lane's own); ``env``: its environment (an
    ISA cap). Returns the results file, <root>/out/lanes/<lane>.jsonl, beside every other
    framework's lanes. ``session.posargs`` go to pytest."""
    tmp = Path(session.create_tmp())
    sources = [copy(root, tmp / "poolgrad-src")] + ([copy(plugin, tmp / "plugin-src")] if plugin else [])
    # Bytecode compiled at install: workers import the framework afresh on every (re)start.
    session.install("--compile-bytecode", *sources, *requirements)
    out = root / "out" / "lanes"
    out.mkdir(parents=True, exist_ok=True)
    results = out / f"{lane}.jsonl"
    session.chdir(tmp)
    session.run("pytest", "--pyargs", "poolgrad.conformance", "--frameworks", framework, "--variants", variants,
                "--devices", "cpu", "-n", "2", "--dist", "loadgroup", "-q", "-p", "no:cacheprovider",
                # Cold by default; the publishing workflow keeps compilations between its runs.
                "--results", str(results), "--compile-cache", os.environ.get("POOLGRAD_LANE_CACHE") or "none",
                *(arg for path in findings for arg in ("--findings", str(path))), *session.posargs,
                env=env or {}, success_codes=[0, 1])
    # Exit 1 also covers collection errors: insist on records of every variant and the closing
    # environment record (a result or unsupported record names its target, framework-variant-device).
    records = [json.loads(line) for line in results.read_text().splitlines()]
    texts = {r["id"]: r["text"] for r in records if r.get("record") == "text"}
    targets = {texts.get(r["target"], r["target"]) for r in records if "target" in r}
    ran = {t.split("-", 1)[1].rpartition("-")[0] for t in targets}
    missing = set(variants.split(",")) - ran
    if not records or records[-1].get("record") != "environment" or missing:
        session.error(f"{results} is incomplete: no records for {sorted(missing)} or no environment record")
    session.log(f"{results}: {sum('verdict' in r for r in records)} result records")
    return results


def copy(src: Path, dest: Path) -> str:
    """A copy of a source tree to install from."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(*_NOT_SOURCES))
    return str(dest)
