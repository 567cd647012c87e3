"""Which dedup store an agent's consumer gets: durable for Workers and Planners by default."""

from __future__ import annotations

import pytest

from disco import Planner, Tool, Worker
from disco.agents import AgentError
from disco.bus import DurableDedupStore
from disco.clients import MemoryClient, ServiceClientSettings
from disco.settings import BusSettings
from disco.testing import InMemoryMemory

SETTINGS = BusSettings(bus_dedup_ttl_seconds=120, bus_dedup_window_size=50)


def _memory() -> MemoryClient:
    # Never started: choosing the store makes no call.
    return MemoryClient.from_settings(ServiceClientSettings(memory_url="http://127.0.0.1:9"))


@pytest.mark.parametrize("kind", [Worker, Planner])
def test_workers_and_planners_keep_their_dedup_marks_in_the_memory_service(
    kind: type[Worker] | type[Planner],
) -> None:
    memory = _memory()
    store = kind("durable")._dedup_store(memory, SETTINGS)

    assert isinstance(store, DurableDedupStore)
    assert (store.marks, store.group, store.ttl_seconds) == (memory, "durable", 120)


def test_a_tool_dedups_in_its_process_unless_it_opts_in() -> None:
    memory = _memory()

    assert Tool("plain")._dedup_store(memory, SETTINGS) is None
    assert isinstance(
        Tool("opted", durable_dedup=True)._dedup_store(memory, SETTINGS), DurableDedupStore
    )
    assert Worker("opted-out", durable_dedup=False)._dedup_store(memory, SETTINGS) is None


def test_a_stand_in_memory_without_marks_falls_back_unless_durable_dedup_was_asked_for() -> None:
    stand_in = InMemoryMemory()

    assert Worker("tested")._dedup_store(stand_in, SETTINGS) is None
    with pytest.raises(AgentError, match="durable_dedup=True needs a memory"):
        Tool("strict", durable_dedup=True)._dedup_store(stand_in, SETTINGS)
