"""TrackerClient against the real tracker (in-process app, real Postgres and broker).

One tracker serves the module; each test acts for a tenant of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import httpx
import pytest
import pytest_asyncio
from asgi_lifespan import LifespanManager

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.clients import ServiceValidationError, StaticToken, TrackerClient
from disco.settings import BusSettings
from disco_common.envelope import Envelope
from disco_common.notifications import HumanInputResponse, NotificationType
from disco_common.topics import Topic
from disco_common.tracker import HumanInputWaitRecord, HumanInputWaitStatus
from disco_tracker.main import create_app
from disco_tracker.settings import TrackerSettings
from tests.fixtures.infra import DatabaseUrls
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

RESPONSE_EVENT = "report.approval.received"


@dataclass
class Inbox:
    """The tracker app, a client for one fresh tenant, and a bus to ask questions with."""

    tenant: str
    client: TrackerClient
    bus: BusClient
    transport: httpx.AsyncBaseTransport

    def client_for(self, tenant: str) -> TrackerClient:
        token = StaticToken(mint_dev_token(DEV_AUTH_SECRET, tenant, "alice"))
        return TrackerClient("http://tracker", token=token, transport=self.transport)


@dataclass
class Tracker:
    """The module's started tracker app and a bus to ask questions with."""

    bus: BusClient
    transport: httpx.AsyncBaseTransport


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tracker(
    database: DatabaseUrls, kafka_bootstrap: str, module_topic_prefix: str
) -> AsyncIterator[Tracker]:
    settings = TrackerSettings(
        env="dev",
        database_url=database.app,
        kafka_bootstrap=kafka_bootstrap,
        topic_prefix=module_topic_prefix,
        kafka_session_timeout_ms=1000,
        kafka_heartbeat_interval_ms=300,
    )
    bus_settings = BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=module_topic_prefix)
    async with BusClient(bus_settings, source="test://asker") as bus:
        await bus.ensure_topics()
        app = create_app(settings)
        async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
            yield Tracker(bus, httpx.ASGITransport(app=manager.app))


@pytest_asyncio.fixture(loop_scope="module")
async def inbox(tracker: Tracker) -> AsyncIterator[Inbox]:
    # The database is shared by the session: a tenant of its own isolates this test.
    tenant = f"inbox-{uuid.uuid4().hex[:10]}"
    token = StaticToken(mint_dev_token(DEV_AUTH_SECRET, tenant, "alice"))
    async with TrackerClient("http://tracker", token=token, transport=tracker.transport) as client:
        yield Inbox(tenant, client, tracker.bus, tracker.transport)


async def _ask(inbox: Inbox, question: str, *, task_id: str, tenant: str | None = None) -> Envelope:
    return await inbox.bus.publish(
        Topic.NOTIFICATION_EVENTS,
        NotificationType.HUMAN_INPUT,
        {
            "question": question,
            "response_event": RESPONSE_EVENT,
            "timeout_seconds": 600,
            "task_id": task_id,
        },
        correlation_id=f"corr-{uuid.uuid4().hex[:10]}",
        task_id=task_id,
        tenant_id=tenant or inbox.tenant,
        user_id="alice",
    )


async def _answer(inbox: Inbox, question: Envelope, answer: str) -> None:
    await inbox.bus.publish(
        Topic.NOTIFICATION_EVENTS,
        RESPONSE_EVENT,
        HumanInputResponse(answer=answer, request_id=question.id),
        correlation_id=question.correlation_id,
        tenant_id=question.tenant_id,
        user_id="bob",
    )


async def _eventually(
    read: Callable[[], Awaitable[list[HumanInputWaitRecord]]],
    done: Callable[[list[HumanInputWaitRecord]], bool],
    timeout: float = 20.0,
) -> list[HumanInputWaitRecord]:
    """Poll ``read`` until ``done`` holds (the tracker records questions from the bus)."""

    async def check() -> tuple[list[HumanInputWaitRecord]] | None:
        seen = await read()
        return (seen,) if done(seen) else None

    (seen,) = await eventually(check, timeout=timeout, interval=0.1, what="the tracker's list")
    return seen


async def _waiting(inbox: Inbox) -> list[HumanInputWaitRecord]:
    return (await inbox.client.list_questions(status="waiting")).items


async def test_the_inbox_lists_waiting_questions_and_leaves_out_answered_ones(
    inbox: Inbox,
) -> None:
    first = await _ask(inbox, "Publish the Q3 report?", task_id="task-q3")
    second = await _ask(inbox, "Publish the Q4 report?", task_id="task-q4")
    await _eventually(lambda: _waiting(inbox), lambda items: len(items) == 2)
    await _answer(inbox, first, "yes")

    waiting = await _eventually(lambda: _waiting(inbox), lambda items: len(items) == 1)
    answered = await inbox.client.get_question(first.correlation_id or "")

    assert [(q.correlation_id, q.question) for q in waiting] == [
        (second.correlation_id, "Publish the Q4 report?")
    ]
    assert waiting[0].status is HumanInputWaitStatus.WAITING
    assert waiting[0].response_event == RESPONSE_EVENT
    assert waiting[0].request_id == second.id
    assert waiting[0].deadline is not None
    assert [q.status for q in answered] == [HumanInputWaitStatus.ANSWERED]


async def test_questions_page_by_page_come_each_exactly_once(inbox: Inbox) -> None:
    asked = [await _ask(inbox, f"Question {i}?", task_id=f"task-{i}") for i in range(5)]
    await _eventually(lambda: _waiting(inbox), lambda items: len(items) == 5)

    first_page = await inbox.client.list_questions(limit=2)
    listed = [q async for q in inbox.client.iter_questions(limit=2)]

    assert len(first_page.items) == 2
    assert first_page.next_cursor is not None
    assert sorted(q.correlation_id for q in listed) == sorted(e.correlation_id or "" for e in asked)


async def test_questions_filter_by_task(inbox: Inbox) -> None:
    await _ask(inbox, "Mine?", task_id="task-mine")
    await _ask(inbox, "Theirs?", task_id="task-theirs")
    await _eventually(lambda: _waiting(inbox), lambda items: len(items) == 2)

    page = await inbox.client.list_questions(task_id="task-mine")

    assert [q.question for q in page.items] == ["Mine?"]


async def test_another_tenants_questions_are_not_listed(inbox: Inbox) -> None:
    other = f"other-{uuid.uuid4().hex[:8]}"
    theirs = await _ask(inbox, "Secret?", task_id="task-secret", tenant=other)
    await _ask(inbox, "Ours?", task_id="task-ours")
    async with inbox.client_for(other) as their_client:
        await _eventually(
            lambda: their_client.get_question(theirs.correlation_id or ""),
            lambda found: found != [],
        )
    ours = await _eventually(lambda: _waiting(inbox), lambda items: len(items) == 1)

    assert [q.question for q in ours] == ["Ours?"]
    assert await inbox.client.get_question(theirs.correlation_id or "") == []


async def test_an_unknown_question_is_an_empty_list(inbox: Inbox) -> None:
    assert await inbox.client.get_question("corr-never-asked") == []


async def test_a_bad_filter_fails_before_anything_is_sent(inbox: Inbox) -> None:
    with pytest.raises(ValueError, match="limit"):
        await inbox.client.list_questions(limit=0)
    with pytest.raises(ValueError, match="status"):
        await inbox.client.list_questions(status="pondering")


async def test_a_cursor_the_tracker_did_not_issue_is_refused_with_the_error_shape(
    inbox: Inbox,
) -> None:
    with pytest.raises(ServiceValidationError) as refused:
        await inbox.client.list_questions(cursor="bm90LWEtY3Vyc29y")

    assert (refused.value.status, refused.value.code) == (400, "invalid_cursor")
    assert "cursor" in refused.value.message
