"""poolgrad's pytest options and the target selection they imply."""

from __future__ import annotations

import difflib
import importlib.util
import os
import shlex
import shutil

import pytest

from poolgrad.adapters import registry, user_adapter
from poolgrad.adapters.base import Target
from poolgrad.knowledge.impacts import IMPACTS


def add_options(parser) -> None:
    g = parser.getgroup("poolgrad", "poolgrad conformance")
    g.addoption("--frameworks", default=None, help=frameworks_help())
    g.addoption("--allow-missing-frameworks", action="store_true",
                help="let --frameworks name frameworks that are not installed (their targets are skipped as "
                     "not_installed), e.g. for one CI matrix over several environments; without it that is an error")
    g.addoption("--variants", default=None, help="comma list of API paths (default: all), e.g. eager,jit,compile")
    g.addoption("--devices", default=None, help="comma list of devices: cpu,gpu (default: cpu, plus gpu when a GPU driver is present)")
    g.addoption("--target", action="append", default=[], metavar="MODULE:FUNCTION",
                help="also check your own pooling kernel (repeatable): function(spec, x, grad_output) -> "
                     "(forward, grad_input) on NumPy arrays (README, 'Your own kernel'); with --target and no "
                     "--frameworks only the kernels are checked")
    g.addoption("--case-file", default=None, metavar="PATH", help="run the cases of this poolgrad-cases/1 JSON file instead of the catalogue")
    g.addoption("--example", default=None, metavar="FINDING_ID",
                help="run the example case file of this finding (its page in docs/frameworks gives the whole command) "
                     "instead of the catalogue")
    g.addoption("--findings", action="append", default=[], metavar="PATH", help="a findings file of your own, added to the knowledge base of the installed frameworks (each framework package's findings.toml); repeatable")
    g.addoption("--results", default=None, metavar="PATH", help="write one JSON-lines record per case x target as the run goes (gzip-compressed where PATH ends in .gz)")
    g.addoption("--report-html", default=None, metavar="PATH", help="write the self-contained HTML conformance report here at the end")
    g.addoption("--report-markdown", default=None, metavar="PATH", help="write a Markdown summary here at the end")
    g.addoption("--fail-on", default=None, choices=tuple(IMPACTS), metavar="IMPACT",
                help="also fail results that findings explain where their impact is IMPACT or worse, from harmless "
                     f"to worst: {', '.join(IMPACTS)} (default: a known behaviour passes as expected)")
    g.addoption("--repeat", type=int, default=1, metavar="N", help="run every case N times; bitwise differences give 'nondeterministic'")
    g.addoption("--fuzz", type=int, default=0, metavar="N", help="add N hypothesis-generated cases per target; a divergence is shrunk and written as a case file")
    g.addoption("--fuzz-out", default="out/fuzz", metavar="DIR", help="where --fuzz writes the case files of divergences it found")
    g.addoption("--case-timeout", type=float, default=120.0, metavar="S", help="seconds a framework call may take before it is 'timeout'")
    g.addoption("--run-undefined", action="store_true",
                help="make the calls a finding calls undefined (they read or write memory they do not own: they may hang, "
                     "crash or return garbage); by default their results are 'not_run'")
    g.addoption("--shard", default=None, metavar="I/N", help="run only shard I of N (1-based); shards partition the run deterministically")
    g.addoption("--ad-modes", default="default", choices=("default", "all", "none"),
                help="forward-mode and double-backward checks (test_jvp, test_double_backward): 'default' on the tie, "
                     "NaN, infinity and signed-zero families in float32 on eager + one compiled path per framework "
                     "(poolgrad/suite/ad_modes.py); 'all' everywhere; 'none' off")
    g.addoption("--audit-findings", action="store_true",
                help="for maintainers of the knowledge base: also list, after the summary, the findings this run "
                     "contradicted (results in their scope that they do not explain) and the stale ones (in scope, "
                     "explaining nothing)")
    g.addoption("--compile-cache", default=None, metavar="DIR|none",
                help="persistent compiler caches of "
                     + ", ".join(n for n, fw in registry.FRAMEWORKS.items() if fw.worker_environment.compile_cache)
                     + " (default: $POOLGRAD_CACHE_DIR, "
                     "else ~/.cache/poolgrad); 'none' compiles everything afresh in a temporary directory")


def frameworks_help() -> str:
    """--frameworks' help: the frameworks installed here, and the known ones that are not."""
    installed = [f for f in registry.FRAMEWORKS if registry.installed(f)]
    absent = [f for f in registry.FRAMEWORKS if f not in installed]
    absent += [f"{f} (plugin {p})" for f, p in registry.PLUGINS.items() if f not in registry.FRAMEWORKS]
    return (f"comma list of frameworks to check (default: every installed one). Installed here: "
            f"{', '.join(installed) or 'none'}" + (f"; not installed: {', '.join(absent)}" if absent else ""))


def _comma(value, allowed, option):
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad:
        raise pytest.UsageError(f"{option}: unknown value {bad[0]!r}; allowed: {', '.join(allowed)}")
    return items


def take_example(config) -> None:
    """--example FINDING_ID: that finding's example case file becomes the run's --case-file."""
    finding_id = config.getoption("example")
    if finding_id is None:
        return
    if config.getoption("case_file"):
        raise pytest.UsageError("--example and --case-file each choose the cases: give one of them")
    from poolgrad.knowledge import schema, sources
    try:
        by_id = {f.id: f for f in sources.load(extra=config.getoption("findings") or ())}
    except schema.FindingsError as e:
        raise pytest.UsageError(str(e)) from None
    if finding_id not in by_id:
        close = difflib.get_close_matches(finding_id, by_id, n=3)
        raise pytest.UsageError(f"--example: no finding {finding_id!r} in the knowledge base of the installed frameworks"
                                + (f"; did you mean {', '.join(close)}?" if close else ""))
    if by_id[finding_id].example is None:
        raise pytest.UsageError(f"--example: finding {finding_id!r} has no example case file")
    config.option.case_file = str(by_id[finding_id].example)


def gpu_driver_present() -> bool:
    """A cheap look for an NVIDIA driver, so the pytest process need not import a framework;
    the framework's own worker confirms the device (or the target skips with its reason)."""
    return os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None


def selected_targets(config) -> tuple[list[Target], list[str]]:
    """Targets to check, and the frameworks asked for but not installed."""
    names = list(registry.FRAMEWORKS)
    frameworks = _comma(config.getoption("frameworks"), list(dict.fromkeys([*names, *registry.PLUGINS])), "--frameworks")
    all_variants = sorted({v for f in registry.FRAMEWORKS.values() for v in f.variants})
    variants = _comma(config.getoption("variants"), all_variants, "--variants")
    devices = _comma(config.getoption("devices"), registry.DEVICES, "--devices")
    if devices is None:
        devices = ["cpu", "gpu"] if gpu_driver_present() else ["cpu"]
    kernels = user_targets(config.getoption("target"))
    asked = frameworks if frameworks is not None else [] if kernels else names
    if not asked and not kernels:
        raise pytest.UsageError(f"no framework adapters are registered (entry point group {registry.ENTRY_POINTS}): "
                                f"install poolgrad (in a checkout: pip install -e .)")
    missing = [f for f in asked if f not in registry.FRAMEWORKS or not registry.installed(f)]
    if frameworks is None:
        asked = [f for f in asked if f not in missing]
    elif missing and not config.getoption("allow_missing_frameworks"):
        raise pytest.UsageError(
            f"--frameworks: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed here "
            f"({'; '.join(map(registry.not_installed_hint, missing))}); installed: "
            f"{', '.join(f for f in names if registry.installed(f)) or 'none'}. "
            f"--allow-missing-frameworks skips their targets instead")
    targets = [t for t in registry.all_targets()
               if t.framework in asked and t.device in devices and (variants is None or t.variant in variants)]
    return targets + kernels, missing


def user_targets(values) -> list[Target]:
    """The targets of --target module:function, checked without importing the module (it may
    import a framework, which this process must not)."""
    targets = []
    for value in values:
        try:
            variant = user_adapter.variant_of(value)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
        module = value.split(":")[0]
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:   # a parent package is missing
            found = False
        if not found:
            raise pytest.UsageError(f"--target {value!r}: module {module!r} is not importable here; "
                                    f"put its directory on PYTHONPATH")
        targets.append(Target(user_adapter.FRAMEWORK, variant, "cpu"))
    return list(dict.fromkeys(targets))


def rerun_command(config, test_name: str, target: Target) -> str:
    """rerun_args with the options that decide its cases and its verdict (case file, findings,
    AD modes)."""
    args = target.rerun_args(test_name)
    if config.getoption("example"):
        args += ["--example", config.getoption("example")]
    elif config.getoption("case_file"):
        args += ["--case-file", os.path.abspath(config.getoption("case_file"))]
    for path in config.getoption("findings") or ():
        args += ["--findings", os.path.abspath(path)]
    if config.getoption("ad_modes") != "default":
        args += ["--ad-modes", config.getoption("ad_modes")]
    if config.getoption("fail_on"):
        args += ["--fail-on", config.getoption("fail_on")]
    return shlex.join(args)


def shard(value) -> tuple[int, int] | None:
    if value is None:
        return None
    try:
        i, n = (int(p) for p in value.split("/"))
    except ValueError:
        raise pytest.UsageError(f"--shard: expected I/N such as 2/4, got {value!r}") from None
    if not 1 <= i <= n:
        raise pytest.UsageError(f"--shard: I must be between 1 and N, got {value!r}")
    return i, n


def compile_cache(value) -> str | None:
    """The compiler cache directory, or None for a cold run ('none')."""
    value = value or os.environ.get("POOLGRAD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "poolgrad")
    return None if value == "none" else value
