"""The collector tuning a bus client (``bus_gc_tuning``) and a service apply once per process."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from disco.bus import _gc
from disco.settings import BusSettings


@pytest.fixture
def fresh_gc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if no client had started yet; the collector's state is put back after."""
    monkeypatch.setattr(_gc, "_gc_tuned", False)
    threshold = gc.get_threshold()
    frozen = gc.get_freeze_count()
    yield
    gc.set_threshold(*threshold)
    if not frozen:
        gc.unfreeze()


@pytest.mark.usefixtures("fresh_gc")
def test_tuning_freezes_the_startup_heap_and_raises_the_young_threshold() -> None:
    gc.set_threshold(700, 10, 10)
    alive = [object()]  # alive "at startup": tracked by the collector until frozen
    assert any(tracked is alive for tracked in gc.get_objects())

    _gc.tune_gc()

    assert gc.get_threshold() == (_gc.GC_YOUNG_THRESHOLD, 10, 10)
    # Frozen objects are out of every generation the collector walks.
    assert not any(tracked is alive for tracked in gc.get_objects())


@pytest.mark.usefixtures("fresh_gc")
def test_tuning_runs_once_and_keeps_a_higher_threshold_the_application_set() -> None:
    gc.set_threshold(50_000, 20, 30)
    _gc.tune_gc()
    assert gc.get_threshold() == (50_000, 20, 30)

    gc.set_threshold(700, 10, 10)
    _gc.tune_gc()  # already done in this process: left alone
    assert gc.get_threshold() == (700, 10, 10)


def test_the_tuning_is_on_by_default_and_can_be_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert BusSettings().bus_gc_tuning is True
    monkeypatch.setenv("DISCO_BUS_GC_TUNING", "false")
    assert BusSettings().bus_gc_tuning is False


@pytest.mark.usefixtures("fresh_gc")
def test_a_service_collects_before_it_freezes_so_startup_garbage_is_not_kept() -> None:
    gc.set_threshold(700, 10, 10)
    cycle: list[object] = []
    cycle.append(cycle)
    garbage = id(cycle)
    del cycle

    _gc.tune_gc(collect=True)

    assert gc.get_threshold() == (_gc.GC_YOUNG_THRESHOLD, 10, 10)
    assert not any(id(tracked) == garbage for tracked in gc.get_objects(generation=None))
