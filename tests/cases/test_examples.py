"""Every finding has an example, a small case file beside its findings file (written by
scripts/examples.py), and it still shows the finding. Run on each installed target of the
finding's scope, the example fails where a case in the finding's scope is no longer explained
(a behaviour change, a failure, a fixed-rule claim the result no longer follows), and passes
where the finding explains every such case and one of them needs it
(poolgrad.cases.examples.needs). Where it shows nothing on that target it is skipped with the
reason: the target cannot run it (a GPU, CPU features, a release outside the history's range,
another oneDNN state, a spec the path does not take), or another finding explains it first.
"""

from __future__ import annotations

import fnmatch
import os

import pytest

from poolgrad.adapters import registry
from poolgrad.adapters.base import Target
from poolgrad.adapters.pool import ONE_THREAD_ENV, WorkerPool, compile_cache_env
from poolgrad.cases import load_case_file
from poolgrad.cases.examples import CATCH_ALL, mode_of, needs
from poolgrad.knowledge import sources
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.finding import Finding
from poolgrad.reports.finding_text import fact_text
from poolgrad.suite import options
from poolgrad.suite.ad_modes import ModeRunner
from poolgrad.suite.check import check
from poolgrad.suite.machine import machine
from poolgrad.suite.runner import GroupRunner

KNOWLEDGE = sources.load()


def test_every_finding_has_an_example():
    missing = [f.id for f in KNOWLEDGE if f.example is None or not f.example.is_file()]
    assert not missing, f"findings without an example file (scripts/examples.py writes them): {missing}"
    for f in KNOWLEDGE:
        cases = load_case_file(f.example)
        assert 1 <= len(cases) <= 3 and sum(c.input.size for c in cases) <= 5000, f.id


def _targets(f: Finding) -> list[Target]:
    """The targets of ``f``'s scope by name (framework, variant, device), the cheapest first: the
    CPU, then the framework's own order of its paths (its pooling functions before the idioms),
    Keras paths (a worker of their own) and compiled ones (a compilation per call) last.
    Whether this machine and release are in it too is asked of the running framework."""
    def cost(t):
        return t.device != "cpu", "keras" in t.variant, t.variant in COMPILED, registry.get(t.framework).variants.index(t.variant)
    return sorted((t for t in registry.all_targets() if t.framework == f.framework and registry.installed(t.framework)
                   and any(fnmatch.fnmatchcase(t.variant, v) for v in f.variants)
                   and any(fnmatch.fnmatchcase(t.device, d) for d in f.devices)), key=cost)


COMPILED = ("compile", "xla", "reduce_xla")  # a compilation per call: seconds each

# Every target of a finding's scope, not only the cheapest one that shows it (much slower: every
# Keras path, every compiled path).
ALL_TARGETS = bool(os.environ.get("POOLGRAD_EXAMPLES_ALL_TARGETS"))


@pytest.fixture(scope="module")
def pool():
    # As a run's workers: one thread each, the run's compiler caches (a rerun compiles nothing).
    p = WorkerPool(env={**ONE_THREAD_ENV, **compile_cache_env(options.compile_cache(None))})
    yield p
    p.close()


def _shown(f, target, pool) -> list[str]:
    """What is wrong with ``f``'s example on ``target`` (nothing: it shows the finding)."""
    info = pool.describe(target.framework)
    here = machine(target.framework, info.get("environment"))
    version = info.get("version") or ""
    if not f.in_target(target.framework, target.variant, target.device, version, here) or f.on_machine(here) is None:
        pytest.skip(f"{f.id} is not in scope on {target.id} here ({target.framework} {version}, CPU features "
                    f"{', '.join(sorted(here.cpu_features))}; it needs {_needs(f)})")
    mode = mode_of(f)
    cases = load_case_file(f.example)
    runner = GroupRunner(pool, timeout_s=120) if mode == "backward" else ModeRunner(pool, mode, timeout_s=120)
    for c in cases:
        runner.register(c, target)
    without = Knowledge([g for g in KNOWLEDGE if g.id != f.id], KNOWLEDGE.history)
    problems, needed, ran, others, reordered, too, chance = [], False, [], [], [], [], []
    for c in cases:
        outcomes = runner.outcomes(c, target)
        checked = check(c, target, version, outcomes, KNOWLEDGE, 0.0, here, mode)
        j = checked.judgement
        if f.id not in {g.id for g in j.in_scope} or j.outcome == "skipped":
            ran.append(f"{c.id}: {j.outcome}, {outcomes[0].message or 'not in its scope'}")
        elif f.verdict == "crash" and checked.record["verdict"] != "crash":
            pytest.skip(f"{f.id}: whether the call crashes depends on the heap layout; on {target.id} this one "
                        f"did not ({c.id}: {checked.message})")
        elif f.id in {g.id for g in j.explained_by}:
            alone = check(c, target, version, outcomes, without, 0.0, here, mode).judgement
            if needs(f, alone):
                needed = True
            else:
                too.append(f"{c.id}: {', '.join(g.id for g in alone.explained_by)}")
        elif j.outcome == "expected":  # another finding's claim comes first here (a failure claim)
            others.append(f"{c.id}: {', '.join(g.id for g in j.explained_by)}")
        elif checked.record["verdict"] == "reordered":  # the spec takes any order of the sums (SPEC.md)
            reordered.append(c.id)
        elif j.outcome == "pass" and f.verdict in CATCH_ALL:  # no fixed rule: the spec's result by chance
            chance.append(c.id)
        else:
            problems.append(f"{c.id}: {j.outcome}, explained by {[g.id for g in j.explained_by]}")
    if problems or needed:
        return problems
    if len(ran) == len(cases):
        pytest.skip(f"no case of {f.id}'s example is in its scope on {target.id}: {'; '.join(ran)}")
    if reordered:
        pytest.skip(f"{f.id}: {', '.join(reordered)} route as the spec and sum in another order, which the "
                    f"spec accepts (verdict reordered): the finding's order is not needed on {target.id}")
    if chance:
        pytest.skip(f"{f.id} claims no fixed rule, and on {target.id} {', '.join(chance)} came out as the spec's")
    reason = "; ".join(others) or "; ".join(too)
    pytest.skip(f"on {target.id} other findings explain {f.id}'s example too, first or alone: {reason}")


def _needs(f) -> str:
    parts = [f"releases {f.versions}" if str(f.versions) else "",
             f"CPU features {', '.join(f.cpu_features)}" if f.cpu_features else "",
             f"kernel features {', '.join(f.kernel_features)}" if f.kernel_features else "",
             ", ".join(fact_text(k, v) for k, v in f.machine_facts),
             ", ".join(f"{d} on {' '.join(r)}" for d, r in f.dtype_cpu_features)]
    return "; ".join(p for p in parts if p) or "its scope"


@pytest.mark.parametrize("f", KNOWLEDGE, ids=lambda f: f.id)
def test_example_shows_its_finding(f, pool):
    """On the cheapest target of its scope that runs it (every one: POOLGRAD_EXAMPLES_ALL_TARGETS=1)."""
    if f.example is None or not f.example.is_file():
        pytest.skip(f"{f.id} has no example file (test_every_finding_has_an_example fails on it)")
    skipped, shown = [], False
    for target in _targets(f):
        if target.device == "gpu" and not options.gpu_driver_present():
            skipped.append(f"{target.id}: its example runs on a GPU and this machine has none")
            continue
        try:
            problems = _shown(f, target, pool)
        except pytest.skip.Exception as e:
            skipped.append(str(e))
            continue
        assert not problems, f"{f.example.name} on {target.id}, {mode_of(f)}: " + "; ".join(problems)
        shown = True
        if not ALL_TARGETS:
            return
    if not shown:
        pytest.skip("; ".join(skipped) or f"{f.id}: no target of its scope is installed")
