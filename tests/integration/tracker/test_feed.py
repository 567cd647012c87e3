"""``GET /v1/tracker/feed``: changes to plans and tasks, live, per tenant, resumable."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest

from disco._dev.ports import free_port
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.clients import StaticToken, TrackerClient
from disco.settings import BusSettings
from disco_common.ids import utcnow
from disco_common.tracker import FeedEvent
from tests.fixtures.infra import DatabaseUrls
from tests.integration.tracker.read_model_support import (
    TrackerApp,
    auth,
    eventually,
    running_tracker,
    tracker_fixture,
    tracker_settings,
)
from tests.integration.tracker.scenario import Scenario, plan_scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")

tracker = tracker_fixture()


def _client(url: str, tenant: str) -> TrackerClient:
    return TrackerClient(url, token=StaticToken(mint_dev_token(DEV_AUTH_SECRET, tenant, "alice")))


def _scenario(tenant: str) -> Scenario:
    return plan_scenario(tenant, start=utcnow() - timedelta(minutes=1))


class Follower:
    """Follows a tenant's feed with the typed client in the background."""

    def __init__(self, client: TrackerClient, **options: object) -> None:
        self.client = client
        self.seen: list[FeedEvent] = []
        self._options = options
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Follower:
        await self.client.start()
        self._task = asyncio.create_task(self._follow())
        return self

    async def _follow(self) -> None:
        async for change in self.client.feed(**self._options):  # type: ignore[arg-type]
            self.seen.append(change)

    async def until(self, done: Callable[[list[FeedEvent]], bool]) -> list[FeedEvent]:
        async def read() -> list[FeedEvent]:
            return list(self.seen)

        return await eventually(read, done)

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self.client.stop()


def _plan_done(plan_id: str) -> Callable[[list[FeedEvent]], bool]:
    return lambda seen: any(
        e.kind == "plan" and e.plan_id == plan_id and e.status == "completed" for e in seen
    )


async def test_the_feed_delivers_plan_and_task_changes_live(tracker: TrackerApp) -> None:
    tenant = tracker.new_tenant()
    scenario = _scenario(tenant)

    every_task = {scenario.action_task_id, *scenario.sub_task_ids}

    def all_done(seen: list[FeedEvent]) -> bool:
        finished = {e.task_id for e in seen if e.kind == "task" and e.status == "completed"}
        return _plan_done(scenario.plan_id)(seen) and every_task <= finished

    async with Follower(_client(tracker.url, tenant), after=0) as follower:
        await tracker.publish(scenario.envelopes)
        seen = await follower.until(all_done)

    ids = [e.id for e in seen]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    plan_states = [
        e.current_state for e in seen if e.plan_id == scenario.plan_id and e.kind == "plan"
    ]
    assert plan_states[-1] == "done"
    finished = {e.task_id for e in seen if e.kind == "task" and e.status == "completed"}
    assert {scenario.action_task_id, *scenario.sub_task_ids} <= finished
    assert all(
        e.agent_name == "carriers"
        for e in seen
        if e.task_id in scenario.sub_task_ids[:1] and e.status == "completed"
    )


async def test_the_feed_resumes_after_the_last_event_id(tracker: TrackerApp) -> None:
    tenant = tracker.new_tenant()
    first, second = _scenario(tenant), _scenario(tenant)
    async with Follower(_client(tracker.url, tenant), after=0) as follower:
        await tracker.publish(first.envelopes)
        before = await follower.until(_plan_done(first.plan_id))
    last = before[-1].id

    await tracker.publish(second.envelopes)
    async with Follower(_client(tracker.url, tenant), after=last) as resumed:
        after = await resumed.until(_plan_done(second.plan_id))
    async with Follower(_client(tracker.url, tenant), after=0) as everything:
        full = await everything.until(_plan_done(second.plan_id))

    assert after[0].id > last
    assert [e.id for e in before + after] == [e.id for e in full][: len(before) + len(after)]
    assert {e.plan_id for e in after if e.kind == "plan"} == {second.plan_id, second.sub_plan_id}


async def test_the_feed_carries_only_the_callers_tenant(tracker: TrackerApp) -> None:
    mine, theirs = tracker.new_tenant("mine"), tracker.new_tenant("theirs")
    their_scenario, my_scenario = _scenario(theirs), _scenario(mine)

    async with Follower(_client(tracker.url, mine), after=0) as follower:
        await tracker.publish(their_scenario.envelopes)
        await tracker.publish(my_scenario.envelopes)
        seen = await follower.until(_plan_done(my_scenario.plan_id))

    plans = {e.plan_id for e in seen}
    assert their_scenario.plan_id not in plans
    assert plans <= {my_scenario.plan_id, my_scenario.sub_plan_id, None}


async def test_the_wire_is_server_sent_events_with_ids(tracker: TrackerApp) -> None:
    tenant = tracker.new_tenant()
    scenario = _scenario(tenant)
    await tracker.publish(scenario.envelopes)
    await tracker.wait_for_plan(
        tenant, scenario.plan_id, lambda v: v["plan"]["status"] == "completed"
    )

    lines: list[str] = []
    async with tracker.http.stream(
        "GET", "/v1/tracker/feed", headers={**auth(tenant), "Last-Event-ID": "0"}
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        kinds: set[str] = set()
        async for line in response.aiter_lines():
            lines.append(line)
            if line.startswith("data:"):
                kinds.add(json.loads(line[len("data:") :])["kind"])
            elif not line and kinds == {"plan", "task"}:
                break  # the end of an event, once both kinds came

    assert any(line.startswith("id: ") for line in lines)
    assert "event: task" in lines
    assert "event: plan" in lines


async def test_a_bad_last_event_id_is_refused(tracker: TrackerApp) -> None:
    response = await tracker.http.get(
        "/v1/tracker/feed", headers={**auth(tracker.new_tenant()), "Last-Event-ID": "yesterday"}
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_last_event_id"


async def test_the_client_reconnects_to_a_restarted_tracker_and_misses_nothing(
    database: DatabaseUrls, kafka_bootstrap: str, session_topic_prefix: str
) -> None:
    prefix = f"{session_topic_prefix}feed{uuid.uuid4().hex[:6]}."
    # The restarted tracker's groups wait out the first one's session (the embedded
    # broker keeps a member that left until its session expires): keep it short.
    settings = tracker_settings(
        database,
        kafka_bootstrap,
        prefix,
        kafka_session_timeout_ms=2000,
        kafka_heartbeat_interval_ms=600,
    )
    port = free_port()
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    first, second = _scenario(tenant), _scenario(tenant)

    async with BusClient(BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=prefix)) as bus:
        await bus.ensure_topics()
        client = _client(f"http://127.0.0.1:{port}", tenant)
        async with Follower(client, after=0) as follower:
            async with running_tracker(settings, bus, port=port) as app:
                await app.publish(first.envelopes)
                await follower.until(_plan_done(first.plan_id))
            # The tracker is gone; the client keeps trying. Changes go on meanwhile.
            async with running_tracker(settings, bus, port=port) as app:
                await app.publish(second.envelopes)
                seen = await follower.until(_plan_done(second.plan_id))

    ids = [e.id for e in seen]
    assert ids == sorted(set(ids))  # none twice, in order
    assert _plan_done(first.plan_id)(seen)
    assert any(e.plan_id == second.plan_id for e in seen)
