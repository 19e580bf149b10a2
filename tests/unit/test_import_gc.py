"""Heavy imports run with the cyclic collector paused (mlaprof.import_gc): it is back as it was
after the block, an error inside included, and only a command's own process freezes what the
imports left (a caller's process, tests and notebooks, keeps collecting all of it)."""

from __future__ import annotations

import gc

import pytest

from mlaprof import import_gc


def test_the_collector_is_paused_inside_and_back_after() -> None:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with import_gc.uncollected():
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen  # not a command's process: nothing frozen


def test_an_error_inside_gives_the_collector_back() -> None:
    with pytest.raises(ValueError), import_gc.uncollected():
        raise ValueError("an import failed")
    assert gc.isenabled()


def test_a_collector_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with import_gc.uncollected():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
