"""The agent runtime's snapshots in the real memory service (in process, real Postgres).

A runner saves after every step and on every stop; ``resume`` reads the latest
full snapshot, and the slim one when the full one cannot be read (too large to
keep, or written by a newer SDK).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from disco.runtime import (
    AgentRunner,
    AgentState,
    AgentStatus,
    CompletionOptions,
    FullSerializer,
    MemorySnapshotStore,
    Message,
    ReasoningEffort,
    ScriptedDriver,
    ScriptedReply,
    SlimSerializer,
    agent_tool,
)
from disco_common.auth import Role
from disco_common.memory import SNAPSHOT_FULL_MAX_BYTES
from tests.integration.memory.conftest import new_id

OPTIONS = CompletionOptions(
    temperature=0.2, reasoning_effort=ReasoningEffort.LOW, budget_tokens=512
)


@agent_tool
def lookup_weather(city: str) -> str:
    """Today's weather."""
    return f"{city}: sunny"


def _runner(store: MemorySnapshotStore, replies: list[Any]) -> AgentRunner:
    return AgentRunner(
        "assistant",
        driver=ScriptedDriver(replies),
        tools=[lookup_weather],
        snapshots=store,
        options=OPTIONS,
    )


async def test_a_session_resumed_from_the_memory_service_is_the_state_it_left(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    session = new_id("session")
    async with memory_client_for(tenant) as memory:
        runner = _runner(
            MemorySnapshotStore(memory),
            [ScriptedReply(tool_calls=[("lookup_weather", {"city": "Oslo"})]), "Sunny in Oslo."],
        )
        finished = await runner.send(runner.new_state(session), "Weather in Oslo?")
        resumed = await _runner(MemorySnapshotStore(memory), []).resume(session)
        listed = await memory.list_snapshots(session)

    assert finished.status is AgentStatus.COMPLETED
    assert resumed == finished
    assert resumed.options.reasoning_effort is ReasoningEffort.LOW
    assert resumed.options.budget_tokens == 512
    (summary,) = listed
    assert summary.status == "completed"
    assert summary.execution_id == finished.execution_id
    assert summary.slim["messages"][-1]["content"] == "Sunny in Oslo."
    assert summary.format_version == FullSerializer.schema_version


async def test_a_snapshot_too_large_to_keep_whole_keeps_the_slim_state_and_resumes_from_it(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    session = new_id("session")
    big = "x" * (SNAPSHOT_FULL_MAX_BYTES // 4)
    state = AgentState(
        agent_id="assistant",
        session_id=session,
        status=AgentStatus.COMPLETED,
        messages=tuple(Message.user(f"{i}:{big}") for i in range(5)),
        options=OPTIONS,
    )
    async with memory_client_for(tenant) as memory:
        store = MemorySnapshotStore(memory)
        await store.save(state, durable=True)
        resumed = await store.load(session, "assistant")
        stored = await memory.get_snapshot(session, "assistant")

    assert stored is not None
    assert stored.full["omitted"] == "too_large"
    assert resumed is not None
    assert resumed.options == OPTIONS
    assert len(resumed.messages) == 5
    assert resumed.messages[0].content.startswith("0:xxx")
    assert len(resumed.messages[0].content) <= SlimSerializer().config.max_content_length + 1


async def test_a_full_snapshot_of_a_newer_sdk_falls_back_to_the_slim_one(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    session = new_id("session")
    state = AgentState(
        agent_id="assistant",
        session_id=session,
        status=AgentStatus.COMPLETED,
        messages=(Message.user("hi"), Message.assistant("hello")),
    )
    future = {**FullSerializer().serialize(state), "schema_version": 99}
    async with memory_client_for(tenant) as memory:
        await memory.put_snapshot(
            session, "assistant", full=future, slim=SlimSerializer().serialize(state)
        )
        resumed = await MemorySnapshotStore(memory).load(session, "assistant")

    assert resumed is not None
    assert [m.content for m in resumed.messages] == ["hi", "hello"]


async def test_snapshots_belong_to_the_user_the_agent_works_for(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    session = new_id("session")
    state = AgentState(agent_id="assistant", session_id=session, status=AgentStatus.COMPLETED)
    async with (
        memory_client_for(tenant, "alice", roles=(Role.USER,)) as alice,
        memory_client_for(tenant, "bob", roles=(Role.USER,)) as bob,
    ):
        await MemorySnapshotStore(alice).save(state, durable=True)
        seen_by_alice = await MemorySnapshotStore(alice).load(session, "assistant")
        seen_by_bob = await MemorySnapshotStore(bob).load(session, "assistant")

    assert seen_by_alice == state
    assert seen_by_bob is None


async def test_text_with_nul_characters_is_saved_with_a_replacement_character(
    memory_client_for: Callable[..., Any], tenant: str
) -> None:
    session = new_id("session")
    state = AgentState(
        agent_id="assistant",
        session_id=session,
        status=AgentStatus.COMPLETED,
        messages=(Message.user("a\x00b"),),
        metadata={"k\x00": ["v\x00"]},
    )
    async with memory_client_for(tenant) as memory:
        store = MemorySnapshotStore(memory)
        await store.save(state, durable=True)
        resumed = await store.load(session, "assistant")

    assert resumed is not None
    assert resumed.messages[0].content == "a\ufffdb"
    assert resumed.metadata == {"k\ufffd": ["v\ufffd"]}
