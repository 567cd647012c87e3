"""The tracker times out questions to humans that nobody answers in time.

One tracker serves the whole module (its group join and start-up cost seconds):
each test asks its own questions (correlation ids, plan ids) and looks only at those.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx
import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer, TopicPartition
from asgi_lifespan import LifespanManager

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.envelope import Envelope
from disco_common.notifications import HumanInputResponse, NotificationType
from disco_common.system_events import SystemEventType
from disco_common.topics import Topic, dlq_topic, topic_name
from disco_tracker.main import create_app
from disco_tracker.settings import TrackerSettings
from disco_tracker.state import TrackerState
from tests.fixtures.bus import read_envelopes
from tests.fixtures.infra import DatabaseUrls
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

RESPONSE_EVENT = "document.approval.received"


@dataclass
class Tracker:
    http: httpx.AsyncClient
    bus: BusClient
    prefix: str
    bootstrap: str
    group: str  # the tracker's consumer group, as the broker names it
    state: TrackerState


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tracker(
    database: DatabaseUrls, kafka_bootstrap: str, module_topic_prefix: str
) -> AsyncIterator[Tracker]:
    topic_prefix = module_topic_prefix
    settings = TrackerSettings(
        env="dev",
        database_url=database.app,
        kafka_bootstrap=kafka_bootstrap,
        topic_prefix=topic_prefix,
        # Room for the event loop to stall (the test shares it with the app).
        kafka_session_timeout_ms=4000,
        kafka_heartbeat_interval_ms=1000,
        hitl_sweep_interval_seconds=0.2,
        outbox_sweep_interval_seconds=0.5,
    )
    bus_settings = BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix)
    async with BusClient(bus_settings, source="test://asker") as bus:
        await bus.ensure_topics()
        app = create_app(settings)
        async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
            transport = httpx.ASGITransport(app=manager.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://tracker") as http:
                yield Tracker(
                    http,
                    bus,
                    topic_prefix,
                    kafka_bootstrap,
                    bus.group_name(settings.hitl_consumer_group),
                    TrackerState.of(app),
                )


def _auth(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {mint_dev_token(DEV_AUTH_SECRET, tenant, 'alice')}"}


async def _ask(
    tracker: Tracker,
    *,
    timeout_seconds: int,
    tenant: str = "acme",
    correlation_id: str | None = None,
    plan_id: str | None = None,
) -> Envelope:
    correlation = correlation_id or f"corr-{uuid.uuid4().hex[:8]}"
    return await tracker.bus.publish(
        Topic.NOTIFICATION_EVENTS,
        NotificationType.HUMAN_INPUT,
        {
            "question": "Approve the document?",
            "response_event": RESPONSE_EVENT,
            "timeout_seconds": timeout_seconds,
            "task_id": f"task-{correlation}",
        },
        correlation_id=correlation,
        task_id=f"task-{correlation}",
        plan_id=plan_id,
        tenant_id=tenant,
        user_id="alice",
    )


async def _answer(tracker: Tracker, question: Envelope, answer: object) -> None:
    await tracker.bus.publish(
        Topic.NOTIFICATION_EVENTS,
        RESPONSE_EVENT,
        HumanInputResponse(answer=answer, request_id=question.id).model_dump(mode="json"),
        correlation_id=question.correlation_id,
        tenant_id=question.tenant_id,
        user_id="bob",
    )


async def _read(tracker: Tracker, topic: str, keep: Callable[[Envelope], bool]) -> list[Envelope]:
    """Every envelope on ``topic`` so far (start to current end) that ``keep`` accepts."""
    name = topic_name(topic, tracker.prefix)
    return [e for e in await read_envelopes(tracker.bootstrap, name) if keep(e)]


async def _wait_for(
    tracker: Tracker, topic: str, keep: Callable[[Envelope], bool], *, seconds: float = 30.0
) -> list[Envelope]:
    """Read ``topic`` with one reader until an envelope ``keep`` accepts came; all such.

    One reader for the whole wait: a reader per poll fetched the metadata of
    every topic of the session again and again, starving the in-process
    tracker's consumer of the event loop until its group session expired.
    """
    name = topic_name(topic, tracker.prefix)
    try:
        found = await read_envelopes(
            tracker.bootstrap, name, lambda seen: any(keep(e) for e in seen), timeout=seconds
        )
    except TimeoutError:
        pytest.fail(f"nothing awaited reached {name} in {seconds} s; {await _diagnosis(tracker)}")
    return [e for e in found if keep(e)]


async def _diagnosis(tracker: Tracker) -> str:
    """For a failure message: the tracker's waits and outbox counters, and how far its
    consumer group got on ``notification-events``."""
    waits = await tracker.http.get("/v1/tracker/hitl", headers=_auth("acme"))
    metrics = await tracker.http.get("/metrics")
    counters = [
        line
        for line in metrics.text.splitlines()
        if line.startswith("disco_outbox") and "_total " in line
    ]
    name = topic_name(Topic.NOTIFICATION_EVENTS, tracker.prefix)
    probe = AIOKafkaConsumer(bootstrap_servers=tracker.bootstrap, group_id=tracker.group)
    try:
        await probe.start()
        partitions = [TopicPartition(name, p) for p in probe.partitions_for_topic(name) or ()]
        ends = await probe.end_offsets(partitions)
        committed = {tp.partition: await probe.committed(tp) for tp in partitions}
        offsets = f"end {[ends[tp] for tp in partitions]} committed {committed}"
    except Exception as exc:
        offsets = repr(exc)
    finally:
        await probe.stop()
    return f"waits: {waits.text}; metrics: {counters}; {name}: {offsets}"


async def _status(tracker: Tracker, correlation_id: str, tenant: str = "acme") -> str | None:
    response = await tracker.http.get(f"/v1/tracker/hitl/{correlation_id}", headers=_auth(tenant))
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return str(response.json()[0]["status"])


async def _wait_for_status(tracker: Tracker, correlation_id: str, status: str) -> str | None:
    async def reached() -> bool:
        return await _status(tracker, correlation_id) == status

    try:
        await eventually(reached, timeout=20, interval=0.1, what=f"status {status!r}")
    except AssertionError:
        return await _status(tracker, correlation_id)
    return status


def _new_plan() -> str:
    return f"plan-{uuid.uuid4().hex[:8]}"


async def _swept_past(tracker: Tracker, plan_id: str, *, timeout_seconds: int) -> None:
    """Return once the sweeper has handled every wait of ``plan_id`` due by now.

    A sentinel: a question of the same plan asked now, with ``timeout_seconds``.
    The sweeper claims due waits oldest deadline first, and the answers of one
    plan share a partition, so once the sentinel's timeout answer is on the topic
    the timeout of any wait of the plan due before it would be there too.
    """
    sentinel = await _ask(tracker, timeout_seconds=timeout_seconds, plan_id=plan_id)
    await _wait_for(tracker, Topic.NOTIFICATION_EVENTS, _timeout_answer_for(sentinel))


def _timeout_answer_for(question: Envelope) -> Callable[[Envelope], bool]:
    def keep(envelope: Envelope) -> bool:
        return (
            envelope.type == RESPONSE_EVENT
            and envelope.correlation_id == question.correlation_id
            and isinstance(envelope.data, dict)
            and envelope.data.get("timed_out") is True
        )

    return keep


async def test_an_unanswered_question_gets_one_timeout_answer_and_a_task_timeout(
    tracker: Tracker,
) -> None:
    question = await _ask(tracker, timeout_seconds=1)

    answers = await _wait_for(tracker, Topic.NOTIFICATION_EVENTS, _timeout_answer_for(question))
    timeouts = await _wait_for(
        tracker,
        Topic.SYSTEM_EVENTS,
        lambda e: (
            e.type == SystemEventType.TASK_TIMEOUT and e.correlation_id == question.correlation_id
        ),
    )

    assert len(answers) == 1
    answer = answers[0]
    assert (answer.tenant_id, answer.user_id, answer.task_id) == ("acme", "alice", question.task_id)
    assert answer.causation_id == question.id
    assert HumanInputResponse.model_validate(answer.data).answer is None
    assert len(timeouts) == 1
    assert timeouts[0].data["reason"] == "hitl_timeout"  # type: ignore[index, call-overload]
    assert timeouts[0].data["timeout_seconds"] == 1  # type: ignore[index, call-overload]
    assert await _status(tracker, question.correlation_id or "") == "timed_out"


async def test_the_watch_trails_the_bus_by_the_ingests_linger(tracker: Tracker) -> None:
    # notification-events carries every UI event of every stream: at the 1 ms wait the
    # watch would fetch hundreds of times a second while one streams.
    question = await _ask(tracker, timeout_seconds=600)
    assert await _wait_for_status(tracker, question.correlation_id or "", "waiting") == "waiting"

    watch = tracker.state.hitl
    linger = tracker.state.settings.ingest_linger_ms
    assert watch is not None
    assert linger > 1
    assert (watch.fetch_wait_ms or 0) >= linger  # right after records flowed, too


async def test_a_question_answered_in_time_does_not_time_out(tracker: Tracker) -> None:
    plan = _new_plan()
    question = await _ask(tracker, timeout_seconds=2, plan_id=plan)
    await _answer(tracker, question, "approved")
    assert await _wait_for_status(tracker, question.correlation_id or "", "answered") == "answered"

    # Past the deadline and the sweeps after it: still answered, and no timeout published.
    await _swept_past(tracker, plan, timeout_seconds=2)
    timeouts = await _read(tracker, Topic.NOTIFICATION_EVENTS, _timeout_answer_for(question))

    assert timeouts == []
    assert await _status(tracker, question.correlation_id or "") == "answered"


async def test_a_question_delivered_twice_times_out_once(tracker: Tracker) -> None:
    correlation_id, plan = f"corr-{uuid.uuid4().hex[:8]}", _new_plan()
    first = await _ask(tracker, timeout_seconds=1, correlation_id=correlation_id, plan_id=plan)
    await _ask(tracker, timeout_seconds=1, correlation_id=correlation_id, plan_id=plan)

    await _wait_for(tracker, Topic.NOTIFICATION_EVENTS, _timeout_answer_for(first))
    await _swept_past(tracker, plan, timeout_seconds=1)  # a second, wrong, timeout came by now
    answers = await _read(tracker, Topic.NOTIFICATION_EVENTS, _timeout_answer_for(first))

    assert len(answers) == 1


async def test_an_answer_after_the_timeout_is_recorded_as_late(tracker: Tracker) -> None:
    question = await _ask(tracker, timeout_seconds=1)
    await _wait_for(tracker, Topic.NOTIFICATION_EVENTS, _timeout_answer_for(question))

    await _answer(tracker, question, "approved, but too late")

    assert (
        await _wait_for_status(tracker, question.correlation_id or "", "answered_late")
        == "answered_late"
    )


async def test_a_malformed_question_is_dead_lettered_with_the_reason(tracker: Tracker) -> None:
    bad = await tracker.bus.publish(
        Topic.NOTIFICATION_EVENTS,
        NotificationType.HUMAN_INPUT,
        {"response_event": RESPONSE_EVENT, "timeout_seconds": 5},  # no question
        correlation_id="corr-malformed",
        tenant_id="acme",
    )

    dead = await _wait_for(tracker, dlq_topic(Topic.NOTIFICATION_EVENTS), lambda e: e.id == bad.id)

    assert len(dead) == 1


async def test_another_tenant_cannot_see_a_question(tracker: Tracker) -> None:
    question = await _ask(tracker, timeout_seconds=60, tenant="acme")
    assert await _wait_for_status(tracker, question.correlation_id or "", "waiting") == "waiting"

    response = await tracker.http.get(
        f"/v1/tracker/hitl/{question.correlation_id}", headers=_auth("globex")
    )
    listing = await tracker.http.get("/v1/tracker/hitl", headers=_auth("globex"))

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert all(
        item["correlation_id"] != question.correlation_id for item in listing.json()["items"]
    )


async def test_a_question_without_a_timeout_is_listed_as_waiting_and_never_times_out(
    tracker: Tracker,
) -> None:
    plan = _new_plan()
    question = await tracker.bus.publish(
        Topic.NOTIFICATION_EVENTS,
        NotificationType.HUMAN_INPUT,
        {"question": "Go by boat instead?", "response_event": "trip.boat.decided"},
        correlation_id=f"corr-{uuid.uuid4().hex[:8]}",
        plan_id=plan,
        tenant_id="acme",
    )
    assert await _wait_for_status(tracker, question.correlation_id or "", "waiting") == "waiting"

    await _swept_past(tracker, plan, timeout_seconds=1)
    listing = await tracker.http.get(
        "/v1/tracker/hitl", params={"status": "waiting"}, headers=_auth("acme")
    )

    waiting = [i for i in listing.json()["items"] if i["correlation_id"] == question.correlation_id]
    assert len(waiting) == 1
    assert waiting[0]["deadline"] is None
    assert waiting[0]["question"] == "Go by boat instead?"
