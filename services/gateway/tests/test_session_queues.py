"""A socket's bounded queue: who falls behind gets one STREAM_GAP, nobody else is touched."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from disco_common.envelope import Notification
from disco_gateway.sessions.hub import Gap, Subscriber
from disco_gateway.sessions.mapping import StoredEvent, to_session_event
from disco_gateway.sessions.metrics import StreamMetrics


def _event(n: int, *, agent: str = "a", user: str | None = None) -> StoredEvent:
    envelope = Notification(
        source="disco://agent/a",
        type="TOOL_LOG",
        data={"type": "TOOL_LOG", "agent_name": agent, "payload": {"message": f"line {n}"}},
        session_id="s1",
        tenant_id="acme",
        user_id=user,
    )
    event = to_session_event(envelope, max_bytes=64 * 1024)
    assert event is not None
    return event


def _subscriber(size: int, metrics: StreamMetrics | None = None, **who: object) -> Subscriber:
    fields: dict[str, object] = {"user_id": "alice", "all_users": False, "agents": frozenset()}
    fields.update(who)
    return Subscriber(
        "acme",
        "s1",
        fields["user_id"],  # type: ignore[arg-type]
        fields["all_users"],  # type: ignore[arg-type]
        fields["agents"],  # type: ignore[arg-type]
        size,
        metrics,
    )


async def test_a_full_queue_drops_then_gives_one_gap_after_what_it_held_then_events_again() -> None:
    metrics = StreamMetrics(CollectorRegistry())
    slow, fast = _subscriber(3, metrics), _subscriber(100, metrics)
    events = [_event(n) for n in range(10)]
    for event in events:
        slow.offer(event)
        fast.offer(event)

    held = [await slow.next() for _ in range(3)]
    gap = await slow.next()
    later = _event(10)
    slow.offer(later)

    assert held == events[:3]
    assert gap == Gap(dropped=7)
    assert await slow.next() == later
    assert [await fast.next() for _ in range(10)] == events
    assert metrics.dropped._value.get() == 7
    assert metrics.gaps._value.get() == 1
    assert metrics.events._value.get() == 3 + 10 + 1


def test_a_queue_takes_only_what_its_socket_may_and_wants_to_see() -> None:
    mine = _subscriber(10, agents=frozenset({"helper"}))

    mine.offer(_event(1, agent="helper"))
    mine.offer(_event(2, agent="other"))
    mine.offer(_event(3, agent="helper", user="bob"))

    assert mine.queue.qsize() == 1
