"""Tool approvals in the loop: a call that needs approval parks the execution until decided."""

from __future__ import annotations

import pytest

from disco.runtime import (
    AgentState,
    AgentStatus,
    ApprovalDecided,
    ApprovalRequested,
    CollectingSink,
    InMemorySnapshotStore,
    NoPendingApprovalError,
    ScriptedReply,
    SnapshotError,
    StatusChanged,
    ToolFinished,
    ToolStarted,
)
from libs.sdk.tests.runtime._helpers import call, runner


def booking() -> ScriptedReply:
    return call("book_trip", city="Lisbon", date="2026-05-01", card="4111-2222")


class RecordingChannel:
    """An approval channel that records what it was asked to open."""

    def __init__(self) -> None:
        self.opened: list[AgentState] = []

    async def open(self, state: AgentState) -> None:
        self.opened.append(state)


async def test_a_call_needing_approval_waits_saved_and_announced() -> None:
    store = InMemorySnapshotStore()
    agent, _ = runner([booking()], snapshots=store, approval_timeout_seconds=60)
    events, channel = CollectingSink(), RecordingChannel()

    state = await agent.send(agent.new_state("s"), "Book Lisbon", events=events, approvals=channel)

    assert state.status is AgentStatus.AWAITING_APPROVAL
    wait = state.approval
    assert wait is not None
    assert wait.tool_name == "book_trip"
    assert wait.arguments == {"city": "Lisbon", "date": "2026-05-01", "card": "[redacted]"}
    assert wait.deadline is not None
    assert (wait.deadline - wait.requested_at).total_seconds() == 60
    assert events.of(ToolStarted) == []
    (requested,) = events.of(ApprovalRequested)
    assert requested.call.id == wait.tool_call_id
    assert requested.arguments == wait.arguments
    assert events.of(StatusChanged)[-1].status is AgentStatus.AWAITING_APPROVAL
    # Saved before anyone could decide, and only then made reachable.
    assert await store.load("s", "assistant") == state
    assert channel.opened == [state]


async def test_an_approved_call_runs_and_the_loop_goes_on() -> None:
    agent, driver = runner([booking(), "Booked: TRIP-LIS."])
    events = CollectingSink()
    waiting = await agent.send(agent.new_state("s"), "Book Lisbon", events=events)
    assert waiting.approval is not None

    decided = await agent.decide(
        waiting, waiting.approval.tool_call_id, approved=True, decided_by="alice", events=events
    )
    done = await agent.run(decided, events=events)

    assert done.status is AgentStatus.COMPLETED
    assert done.last_response == "Booked: TRIP-LIS."
    assert driver.requests[1].messages[-1].content == '{"reference":"TRIP-LIS","date":"2026-05-01"}'
    (announced,) = events.of(ApprovalDecided)
    assert (announced.approved, announced.decided_by) == (True, "alice")
    kinds = [type(e).__name__ for e in events.events]
    assert kinds.index("ApprovalRequested") < kinds.index("ApprovalDecided")
    assert kinds.index("ApprovalDecided") < kinds.index("ToolStarted")


async def test_a_denied_call_becomes_a_result_telling_the_model() -> None:
    agent, driver = runner([booking(), "I did not book it."])
    waiting = await agent.send(agent.new_state("s"), "Book Lisbon")
    assert waiting.approval is not None
    events = CollectingSink()

    decided = await agent.decide(
        waiting,
        waiting.approval.tool_call_id,
        approved=False,
        reason="too expensive",
        decided_by="bob",
        events=events,
        announce=False,
    )
    done = await agent.run(decided, events=events)

    assert done.status is AgentStatus.COMPLETED
    told = driver.requests[1].messages[-1].content
    assert told.startswith("The call was denied by bob: too expensive. It did not run.")
    assert events.of(ApprovalDecided) == []  # someone else announced it
    assert events.of(ToolStarted) == []
    (finished,) = events.of(ToolFinished)
    assert (finished.success, finished.executed) == (False, False)


async def test_a_decision_for_a_call_nobody_waits_for_is_refused() -> None:
    agent, _ = runner([booking()])
    waiting = await agent.send(agent.new_state("s"), "Book Lisbon")

    with pytest.raises(NoPendingApprovalError, match="does not wait for approval of 'other'"):
        await agent.decide(waiting, "other", approved=True)


async def test_the_first_decision_wins() -> None:
    agent, _ = runner([booking(), "Done."])
    waiting = await agent.send(agent.new_state("s"), "Book Lisbon")
    assert waiting.approval is not None
    call_id = waiting.approval.tool_call_id

    decided = await agent.decide(waiting, call_id, approved=True)

    with pytest.raises(NoPendingApprovalError):
        await agent.decide(decided, call_id, approved=False)


async def test_an_execution_waiting_for_approval_does_not_move_when_run_again() -> None:
    agent, driver = runner([booking()])
    waiting = await agent.send(agent.new_state("s"), "Book Lisbon")

    again = await agent.run(waiting)

    assert again == waiting
    assert len(driver.requests) == 1


async def test_calls_after_the_one_waiting_run_once_it_is_decided_in_order() -> None:
    reply = ScriptedReply(
        tool_calls=[
            ("lookup_weather", {"city": "Lisbon"}),
            ("book_trip", {"city": "Lisbon", "date": "2026-05-01"}),
            ("local_time", {"city": "Lisbon"}),
        ]
    )
    agent, driver = runner([reply, "All done."])
    waiting = await agent.send(agent.new_state("s"), "Plan Lisbon")
    assert waiting.approval is not None
    assert [m.name for m in waiting.execution_buffer if m.role == "tool"] == ["lookup_weather"]

    done = await agent.run(
        await agent.decide(waiting, waiting.approval.tool_call_id, approved=True)
    )

    results = [m.name for m in driver.requests[1].messages if m.role == "tool"]
    assert results == ["lookup_weather", "book_trip", "local_time"]
    assert done.steps[0].tool_calls == waiting.in_flight.tool_calls  # type: ignore[union-attr]


async def test_when_the_wait_cannot_be_saved_nobody_is_asked() -> None:
    class BrokenStore(InMemorySnapshotStore):
        async def save(self, state: AgentState, *, durable: bool = False) -> None:
            if durable:
                raise SnapshotError("memory service down")
            await super().save(state)

    agent, _ = runner([booking()], snapshots=BrokenStore())
    channel = RecordingChannel()

    with pytest.raises(SnapshotError, match="memory service down"):
        await agent.send(agent.new_state("s"), "Book Lisbon", approvals=channel)

    assert channel.opened == []


async def test_a_restarted_process_resumes_a_waiting_state_and_finishes_it() -> None:
    store = InMemorySnapshotStore()
    first, _ = runner([booking()], snapshots=store)
    await first.send(first.new_state("s"), "Book Lisbon")

    second, _ = runner(["Booked."], snapshots=store)  # a new process, the same snapshots
    resumed = await second.resume("s")
    assert resumed is not None
    assert resumed.approval is not None
    done = await second.run(
        await second.decide(resumed, resumed.approval.tool_call_id, approved=True)
    )

    assert done.status is AgentStatus.COMPLETED
    assert [m.content for m in done.messages] == ["Book Lisbon", "Booked."]
