"""What a run makes to keep (cases, test items) is made with the cyclic collector off and then
frozen; the collector is on again afterwards, whatever happened while making it."""

from __future__ import annotations

import gc

import pytest

from poolgrad.suite.run import long_lived


def test_the_collector_is_off_while_making_and_on_again_after_an_error():
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with long_lived():
            assert not gc.isenabled()
            kept = [[i] for i in range(1000)]
            raise ValueError("collection failed")
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(kept)


def test_a_collector_the_user_turned_off_stays_off():
    gc.disable()
    try:
        with long_lived():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
