"""poolgrad's pytest plugin: options, target discovery, result collection, report at exit.

Registered through the ``pytest11`` entry point, so every pytest run where poolgrad is
installed (a checkout installed with ``pip install -e``, as run.sh does, included) has it.
The logic lives in ``poolgrad/suite/``; these are only the hooks.
"""

from __future__ import annotations

import pytest

from poolgrad.adapters import registry
from poolgrad.suite import options, scheduling, sharding
from poolgrad.suite.execution import Execution
from poolgrad.suite.plugin import ConformancePlugin, XdistHooks
from poolgrad.suite.results import Results
from poolgrad.suite.run import Run

RUN = pytest.StashKey[Run]()
EXECUTION = pytest.StashKey[Execution]()


def pytest_addoption(parser):
    options.add_options(parser)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config):
    # Plain `pytest -n N` distributes by batching group, as `--dist loadgroup` does: xdist's
    # default ("load") would split groups between processes and run (compile) them twice.
    # A wrapper runs before xdist's own hook, which fills in "load" only where --dist was not
    # given, whatever order the plugins were registered in (a tryfirst hook ran after xdist's
    # where poolgrad's entry point was found first, as under `python -m pytest` in a checkout).
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "loadgroup"
    return (yield)


def pytest_configure(config):
    options.take_example(config)
    run = Run(config)
    config.stash[RUN], config.stash[EXECUTION] = run, Execution(run)
    results = Results(run) if run.is_controller else None  # with xdist, the workers' records come here
    config.pluginmanager.register(ConformancePlugin(run, config.stash[EXECUTION], results), "poolgrad-conformance")
    # "xdist" when loaded by its entry point, "xdist.plugin" by `-p xdist.plugin` (autoload off).
    if any(config.pluginmanager.hasplugin(name) for name in ("xdist", "xdist.plugin")):
        config.pluginmanager.register(XdistHooks(run), "poolgrad-xdist")
        # Work units arrive ordered by cost (poolgrad/suite/scheduling.py); xdist's own reordering
        # sorts them by test count, which says nothing about compile-bound units.
        config.option.loadscopereorder = False


def pytest_generate_tests(metafunc):
    state = metafunc.config.stash[RUN]
    names = metafunc.fixturenames
    if "case" in names and "target" in names:
        # Work units are looked up by test id (Run.test_units), not xdist_group marks.
        # A case's draws are checked in its test (Run.checks), not as tests of their own.
        metafunc.parametrize(["case", "target"], [pytest.param(c, t, id=tid) for tid, c, t in state.pairs()])
    elif "fuzz_target" in names:
        n = metafunc.config.getoption("fuzz")
        metafunc.parametrize("fuzz_target", state.targets if n > 0 else [], ids=lambda t: t.id)
    elif "installable_framework" in names:
        metafunc.parametrize("installable_framework", list(registry.FRAMEWORKS))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    state = config.stash[RUN]
    if state.shard is not None:
        items[:] = sharding.select(items, *state.shard)
    items[:] = scheduling.order(items, state.checks, state.units())
    state.items = list(items)


@pytest.fixture(scope="session")
def poolgrad(request) -> Execution:
    """This process's execution of the run (``.run``: its options, targets and cases)."""
    return request.config.stash[EXECUTION]
