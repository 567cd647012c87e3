"""Progress on system-events never holds up or fails the work that reports it."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from disco.agents._common import publish_system_event
from disco.bus import PublishError
from disco_common.envelope import Envelope
from disco_common.system_events import SystemEventType, TaskStartedData


class _UnacknowledgedBus:
    """A bus whose broker has not acknowledged anything yet (the futures stay open)."""

    def __init__(self) -> None:
        self.acks: list[asyncio.Future[Envelope]] = []
        self.sent: list[dict[str, Any]] = []

    async def send(self, topic: str, event_type: str, data: Any, **attributes: Any) -> Any:
        self.sent.append({"topic": topic, "type": event_type, **attributes})
        ack: asyncio.Future[Envelope] = asyncio.get_running_loop().create_future()
        self.acks.append(ack)
        return ack


def _started() -> TaskStartedData:
    return TaskStartedData(
        task_id="t-1", agent_name="worker", agent_id="worker.1", event_type="x.requested"
    )


async def test_progress_is_handed_over_without_waiting_for_the_broker() -> None:
    bus = _UnacknowledgedBus()

    # Returns although the broker has not answered (it never will here).
    await asyncio.wait_for(
        publish_system_event(
            bus,  # type: ignore[arg-type]
            SystemEventType.TASK_STARTED,
            _started(),
            task_id="t-1",
        ),
        timeout=1,
    )

    assert bus.sent == [
        {
            "topic": "system-events",
            "type": "task.started",
            "id": None,
            "plan_id": None,
            "task_id": "t-1",
            "time": None,
        }
    ]


async def test_progress_the_broker_refuses_later_is_logged_not_raised() -> None:
    bus = _UnacknowledgedBus()
    await publish_system_event(bus, SystemEventType.TASK_STARTED, _started())  # type: ignore[arg-type]

    with structlog.testing.capture_logs() as logs:
        bus.acks[0].set_exception(PublishError("the broker is away"))
        await asyncio.sleep(0)  # the acknowledgement's callbacks run

    assert [(log["event"], log["event_type"]) for log in logs] == [
        ("system event not published", "task.started")
    ]
