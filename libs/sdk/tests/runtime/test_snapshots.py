"""Snapshot writes: one attempt in place, retries in the background, latest state wins.

The memory service is replaced by a stand-in here (what is tested is the
writer's behaviour); ``tests/integration/memory/test_runtime_snapshots.py``
runs the same store against the real service.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from disco.clients import ServiceUnavailableError
from disco.runtime import AgentState, AgentStatus, MemorySnapshotStore, Message, SnapshotError


class FlakyMemory:
    """Answers ``put_snapshot`` with failures first, then stores."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: list[str] = []
        self.stored: list[str] = []
        self.recovered = asyncio.Event()

    async def put_snapshot(self, session_id: str, agent_id: str, **body: Any) -> None:
        content = body["full"]["messages"][-1]["content"]
        self.attempts.append(content)
        if self.failures > 0:
            self.failures -= 1
            raise ServiceUnavailableError(503, "unavailable", "memory is restarting")
        self.stored.append(content)
        self.recovered.set()


def state(text: str) -> AgentState:
    return AgentState(
        agent_id="assistant",
        session_id="s-1",
        status=AgentStatus.COMPLETED,
        messages=(Message.user(text),),
    )


def store(memory: FlakyMemory) -> MemorySnapshotStore:
    return MemorySnapshotStore(memory, retry_delays=(0.01, 0.02))  # type: ignore[arg-type]


async def test_a_failed_write_costs_the_step_one_attempt_and_is_retried_in_the_background() -> None:
    memory = FlakyMemory(failures=2)
    snapshots = store(memory)

    with capture_logs() as logs:
        await snapshots.save(state("step 1"))
        attempts_during_the_step = len(memory.attempts)
        assert await snapshots.flush(timeout=10)

    assert attempts_during_the_step == 1
    assert memory.stored == ["step 1"]
    assert len(memory.attempts) == 3
    failures = [entry for entry in logs if entry["log_level"] == "warning"]
    assert [entry["attempt"] for entry in failures] == [1, 2]
    assert "memory is restarting" in failures[0]["error"]


async def test_a_newer_state_replaces_an_older_one_still_waiting_to_be_written() -> None:
    memory = FlakyMemory(failures=1)
    snapshots = store(memory)

    await snapshots.save(state("step 1"))  # fails, waits for a retry
    await snapshots.save(state("step 2"))
    assert await snapshots.flush(timeout=10)

    assert memory.stored == ["step 2"]  # step 1 never overwrote step 2


async def test_a_durable_save_waits_for_the_write() -> None:
    memory = FlakyMemory(failures=1)
    snapshots = store(memory)

    await snapshots.save(state("waiting"), durable=True)

    assert memory.stored == ["waiting"]


async def test_a_durable_save_that_cannot_be_written_raises_and_the_write_goes_on() -> None:
    memory = FlakyMemory(failures=4)
    snapshots = store(memory)

    with pytest.raises(SnapshotError, match="could not be saved"):
        await snapshots.save(state("waiting"), durable=True)
    await asyncio.wait_for(memory.recovered.wait(), timeout=10)

    assert memory.stored == ["waiting"]
