"""The collector tuning a bus client applies once per process (``bus_gc_tuning``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from disco.bus import _gc as _client
from disco.settings import BusSettings


@pytest.fixture
def fresh_gc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if no client had started yet; the collector's state is put back after."""
    monkeypatch.setattr(_client, "_gc_tuned", False)
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

    _client._tune_gc()

    assert gc.get_threshold() == (_client._GC_YOUNG_THRESHOLD, 10, 10)
    # Frozen objects are out of every generation the collector walks.
    assert not any(tracked is alive for tracked in gc.get_objects())


@pytest.mark.usefixtures("fresh_gc")
def test_tuning_runs_once_and_keeps_a_higher_threshold_the_application_set() -> None:
    gc.set_threshold(50_000, 20, 30)
    _client._tune_gc()
    assert gc.get_threshold() == (50_000, 20, 30)

    gc.set_threshold(700, 10, 10)
    _client._tune_gc()  # already done in this process: left alone
    assert gc.get_threshold() == (700, 10, 10)


def test_the_tuning_is_on_by_default_and_can_be_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert BusSettings().bus_gc_tuning is True
    monkeypatch.setenv("DISCO_BUS_GC_TUNING", "false")
    assert BusSettings().bus_gc_tuning is False
