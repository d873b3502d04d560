"""A framework worker that aborts, segfaults, hangs or raises costs only the affected cases."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from poolgrad.adapters import registry
from poolgrad.adapters.base import CRASH, ERROR, NO_DEVICE, NOT_INSTALLED, OK, TIMEOUT, Target
from poolgrad.adapters.fake_adapter import ABORT, HANG, POISON, RAISE, SEGFAULT
from poolgrad.adapters.worker import FORKS
from fake_frameworks import SPEC, case, fake, fake_pool
from poolgrad.reference import backward, forward

CPU = Target("fake", "eager", "cpu")
BROKEN = registry.Framework("broken", "poolgrad.adapters.no_such_adapter", "numpy", ("numpy",), ("eager",))


@pytest.fixture(scope="module")
def pool():
    with fake_pool(fake("fake"), fake("fake2"), fake("absent", "poolgrad_no_such_module"), BROKEN) as p:
        yield p


def run_one(pool, x, g, timeout_s=20.0, target=CPU):
    [outcome] = pool.run_group(target, SPEC, [x], [g], timeout_s)
    return outcome


def assert_matches_reference(outcome, x, g):
    assert outcome.status == OK, outcome.message
    np.testing.assert_array_equal(outcome.forward, forward(SPEC, x))
    np.testing.assert_array_equal(outcome.grad_input, backward(SPEC, x, g))


def test_abort_is_a_crash_and_later_cases_still_run(pool):
    before = run_one(pool, *case(0)).info["pid"]
    crashed = run_one(pool, *case(1, sentinel=ABORT))
    assert crashed.status == CRASH
    assert "killed by SIGABRT" in crashed.message
    x, g = case(2)
    later = run_one(pool, x, g)
    assert_matches_reference(later, x, g)
    assert later.info["pid"] != before  # a fresh worker answered


def test_a_crash_left_by_an_earlier_call_is_not_the_next_cases_result(pool):
    """The poisoned call succeeds and leaves the worker to die on its next call: that case is
    run again in a fresh worker and gets its own result, not the earlier call's crash."""
    assert run_one(pool, *case(1, sentinel=POISON)).status == OK
    x, g = case(2)
    assert_matches_reference(run_one(pool, x, g), x, g)


def test_a_member_run_alone_is_not_blamed_for_the_member_before_it(pool):
    """A failing call's members run alone, one after another, in one worker: one that poisons
    it (a kernel writing out of bounds) must not make the next one's crash its result."""
    cases = [case(11, sentinel=POISON), case(12), case(13, sentinel=RAISE)]
    outcomes = pool.run_group(CPU, SPEC, [x for x, _ in cases], [g for _, g in cases], 20.0)
    assert [o.status for o in outcomes] == [OK, OK, ERROR]
    assert_matches_reference(outcomes[1], *cases[1])


@pytest.mark.skipif(not FORKS, reason="workers are forked from a zygote only where os.pidfd_open exists")
def test_a_crashed_worker_is_forked_again_from_its_zygote_which_imported_the_framework_once(pool):
    before = run_one(pool, *case(0)).info
    assert run_one(pool, *case(1, sentinel=SEGFAULT)).status == CRASH
    after = run_one(pool, *case(2)).info
    assert after["pid"] != before["pid"]
    assert after["imported_by"] == before["imported_by"] not in (after["pid"], before["pid"], os.getpid())


@pytest.mark.skipif(not FORKS, reason="workers are forked from a zygote only where os.pidfd_open exists")
def test_a_worker_whose_zygote_was_killed_still_crashes_cleanly_and_a_new_zygote_takes_over():
    import signal
    with fake_pool(fake("orphan")) as p:
        target = Target("orphan", "eager", "cpu")
        before = run_one(p, *case(0), target=target).info
        os.kill(before["imported_by"], signal.SIGKILL)
        # the orphaned worker's crash has no exit status to read; the case is run again on a
        # worker of a new zygote, whose crash is the case's own
        crashed = run_one(p, *case(1, sentinel=SEGFAULT), target=target)
        assert crashed.status == CRASH and crashed.info["fresh_worker"] and "SIGSEGV" in crashed.message
        after = run_one(p, *case(2), target=target)
        assert_matches_reference(after, *case(2))
        assert after.info["imported_by"] != before["imported_by"]


@pytest.mark.skipif(not FORKS, reason="workers are forked from a zygote only where os.pidfd_open exists")
def test_a_zygote_that_dies_after_it_looked_alive_is_replaced_when_a_worker_is_forked(monkeypatch):
    """Killed between the liveness check and the fork (its pipe is broken): a new zygote forks the worker."""
    import signal

    from poolgrad.adapters import worker as worker_module
    with fake_pool(fake("orphan")) as p:
        target = Target("orphan", "eager", "cpu")
        before = run_one(p, *case(0), target=target).info
        zygote = p._workers["orphan"]._zygote
        os.kill(before["imported_by"], signal.SIGKILL)
        deadline = time.monotonic() + 10  # not join(): the live orphaned worker holds its sentinel open
        while zygote.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not zygote.alive()
        monkeypatch.setattr(worker_module._Zygote, "alive", lambda self: True)
        crashed = run_one(p, *case(1, sentinel=SEGFAULT), target=target)
        assert crashed.status == CRASH
        after = run_one(p, *case(2), target=target)
        assert_matches_reference(after, *case(2))
        assert after.info["imported_by"] != before["imported_by"]


def test_a_pipe_reset_by_a_dying_worker_is_a_crash_and_the_case_runs_again(pool, monkeypatch):
    """A child that dies while answering can reset the pipe (ECONNRESET) instead of closing it."""
    before = run_one(pool, *case(0)).info["pid"]
    worker = pool._workers["fake"]

    def die_and_reset():
        worker._proc.kill()
        worker._proc.join(None)
        raise ConnectionResetError(104, "Connection reset by peer")
    monkeypatch.setattr(worker._conn, "recv", die_and_reset)
    x, g = case(2)
    again = run_one(pool, x, g)
    assert_matches_reference(again, x, g)
    assert again.info["pid"] != before


def test_segfault_is_a_crash_whose_message_quotes_the_worker_stderr(pool):
    crashed = run_one(pool, *case(3, sentinel=SEGFAULT))
    assert crashed.status == CRASH
    assert "killed by SIGSEGV" in crashed.message
    assert "Fatal Python error: Segmentation fault" in crashed.message  # faulthandler, from the log
    assert "fake_adapter.py" in crashed.message


def test_hang_times_out_and_the_next_call_works(pool):
    timed_out = run_one(pool, *case(4, sentinel=HANG), timeout_s=1)
    assert timed_out.status == TIMEOUT
    assert "exceeded 1 s" in timed_out.message
    x, g = case(5)
    assert_matches_reference(run_one(pool, x, g), x, g)


def test_raise_is_an_error_and_keeps_the_worker(pool):
    run_one(pool, *case(8))  # a worker killed by an earlier test restarts here, not below
    starts = pool.workers()["fake"].starts
    errored = run_one(pool, *case(6, sentinel=RAISE))
    assert errored.status == ERROR
    assert errored.message == "ValueError: fake framework refuses the sentinel input"
    x, g = case(7)
    assert_matches_reference(run_one(pool, x, g), x, g)
    assert pool.workers()["fake"].starts == starts


@pytest.mark.parametrize("sentinel, status, says", [(ABORT, CRASH, "SIGABRT"), (RAISE, ERROR, "ValueError")],
                         ids=["crash", "raise"])
def test_failure_in_a_batch_is_narrowed_to_the_failing_case(pool, sentinel, status, says):
    cases = [case(8), case(9, sentinel=sentinel), case(10, n=2)]
    outcomes = pool.run_group(CPU, SPEC, [x for x, _ in cases], [g for _, g in cases], 20.0)
    assert [o.status for o in outcomes] == [OK, status, OK]
    assert says in outcomes[1].message
    for outcome, (x, g) in zip((outcomes[0], outcomes[2]), (cases[0], cases[2])):
        assert_matches_reference(outcome, x, g)
    # each was rerun by itself in a call of the group's shape, so a compiled path compiles once
    assert [o.info["call_shape"] for o in outcomes] == [[4, 2, 4, 4]] * 3


def test_each_framework_has_its_own_process(pool):
    pids = {pool.describe(name)["environment"]["pid"] for name in ("fake", "fake2")}
    assert len(pids) == 2 and os.getpid() not in pids


def test_missing_framework_is_not_installed_and_starts_nothing(pool):
    assert pool.describe("absent") == {"status": NOT_INSTALLED, "message": "absent is not installed"}
    outcome = run_one(pool, *case(11), target=Target("absent", "eager", "cpu"))
    assert (outcome.status, outcome.message) == (NOT_INSTALLED, "absent is not installed")
    assert "absent" not in pool.workers()


def test_adapter_that_fails_to_import_is_an_error(pool):
    desc = pool.describe("broken")
    assert desc["status"] == ERROR
    assert "No module named 'poolgrad.adapters.no_such_adapter'" in desc["message"]
    assert run_one(pool, *case(12), target=Target("broken", "eager", "cpu")).status == ERROR


def test_gpu_target_without_a_gpu_is_no_device(pool):
    outcome = run_one(pool, *case(13), target=Target("fake", "eager", "gpu"))
    assert (outcome.status, outcome.message) == (NO_DEVICE, "no GPU present for fake")


def test_a_crash_message_keeps_what_killed_the_process_however_deep_its_python_stack():
    """faulthandler's stacks are cut to their innermost frames, so a long checkout path
    does not push the allocator's message (which findings match) out of the stderr tail."""
    from poolgrad.adapters.worker import _died, _Log
    frames = [f'  File "/{"very/long/checkout/path/" * 6}module{i}.py", line {i} in f{i}' for i in range(40)]
    log = _Log("torch")
    with open(log.path, "w") as child:
        child.write("\n".join(["free(): invalid pointer", "Fatal Python error: Aborted", "",
                                "Current thread 0x00007f (most recent call first):", *frames, "",
                                "Extension modules: numpy._core._multiarray_umath, torch._C"]) + "\n")
    log.opened()
    message = _died("torch", -6, "running eager/cpu", log)
    log.close()
    assert message.startswith("the torch worker died (killed by SIGABRT) running eager/cpu")
    assert "free(): invalid pointer" in message and "Fatal Python error: Aborted" in message
    assert all(f in message for f in frames[:5]) and frames[5] not in message and "Extension modules" not in message
