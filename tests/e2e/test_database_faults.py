"""A stalled database: prompt 503s, consumers that wait instead of dead-lettering, and recovery.

Real processes throughout: a PostgreSQL server of the test's own (it is the
one stalled, with SIGSTOP on every one of its processes), the session's
broker, and the four services as ``python -m`` processes (the gateway's
session replay reads its own store). While the database is stalled, every
API request is answered (503, the stable error shape) rather than held, and
envelopes arrive for the tracker's ingest, its HITL watch and the gateway's
session reader. Once the database continues, the services recover without a
restart: the ingest applies what came meanwhile, the HITL watch records the
question, its sweeper times it out and the outbox relay publishes the
timeout; the gateway keeps the question in its session's stream (its reader
waited instead of dropping the batch); a question recorded before the stall
and due during it is timed out after it, exactly once (the sweeper resumes
where it stopped). Nothing is dead-lettered. Time to recover is printed, not
asserted.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.notifications import NotificationType
from disco_common.topics import Topic, dlq_topic, topic_name
from tests.fixtures.bus import read_envelopes, read_records
from tests.fixtures.fault_stack import FaultStack, own_database_stack
from tests.fixtures.faults import stalled
from tests.fixtures.waiting import eventually
from tests.integration.tracker.scenario import plan_scenario

TENANT = "acme"
SERVICES = ("registry", "memory", "tracker", "gateway")
SESSION = "stall-session"
# One database read per service, through the request's tenant-scoped session.
READS = {
    "registry": "/v1/agents",
    "memory": "/v1/memory/plans",
    "tracker": "/v1/tracker/plans",
    "gateway": f"/v1/sessions/{SESSION}/events",
}
REQUESTS_PER_SERVICE = 4
ANSWER_EVENT = "ship.answered"
HUB_WAITS = 3


@pytest.fixture
def fault_stack(kafka_bootstrap: str, topic_prefix: str, tmp_path: Path) -> Iterator[FaultStack]:
    """A PostgreSQL server of the test's own, migrated, and the four services on it."""
    with own_database_stack(kafka_bootstrap, topic_prefix, tmp_path, SERVICES) as stack:
        yield stack


async def _request_all(
    http: httpx.AsyncClient, stack: FaultStack, headers: dict[str, str]
) -> list[httpx.Response | BaseException]:
    calls = [
        http.get(f"{stack.services[name].url}{path}", headers=headers)
        for name, path in READS.items()
        for _ in range(REQUESTS_PER_SERVICE)
    ]
    return await asyncio.gather(*calls, return_exceptions=True)


async def _first_success(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], began: float
) -> float:
    async def ok() -> bool:
        try:
            return (await http.get(url, headers=headers)).status_code == 200
        except httpx.HTTPError:
            return False

    await eventually(ok, timeout=60, interval=0.05, what=f"{url} answered 200")
    return time.monotonic() - began


async def _wait_record(
    http: httpx.AsyncClient, stack: FaultStack, correlation_id: str, headers: dict[str, str]
) -> dict[str, Any] | None:
    """The tracker's record of the question with ``correlation_id``, or None (not yet)."""
    url = f"{stack.services['tracker'].url}/v1/tracker/hitl/{correlation_id}"
    response = await http.get(url, headers=headers)
    if response.status_code != 200 or not response.json():
        return None
    record: dict[str, Any] = response.json()[0]
    return record


async def test_a_stalled_database_gives_prompt_503s_and_loses_no_envelope(
    fault_stack: FaultStack,
) -> None:
    stack = fault_stack
    headers = {"Authorization": f"Bearer {mint_dev_token(DEV_AUTH_SECRET, TENANT, 'alice')}"}
    scenario = plan_scenario(TENANT, start=datetime.now(UTC))
    correlation = f"corr-{uuid.uuid4().hex[:8]}"
    early = f"early-{uuid.uuid4().hex[:8]}"
    bus_settings = BusSettings(kafka_bootstrap=stack.bootstrap, topic_prefix=stack.prefix)
    # Longer than the service's bounds (pool + statement): a held request fails here.
    async with (
        httpx.AsyncClient(timeout=30.0) as http,
        BusClient(bus_settings, source="test://faults") as bus,
    ):
        before = await _request_all(http, stack, headers)
        assert all(isinstance(r, httpx.Response) and r.status_code == 200 for r in before)
        # A question the watch records before the stall and that falls due during it:
        # the sweeper must time it out once the database is back, and only once.
        await bus.publish(
            Topic.NOTIFICATION_EVENTS,
            NotificationType.HUMAN_INPUT,
            {"question": "Before?", "response_event": ANSWER_EVENT, "timeout_seconds": 5},
            correlation_id=early,
            tenant_id=TENANT,
            user_id="alice",
        )
        waiting = await eventually(
            lambda: _wait_record(http, stack, early, headers),
            timeout=30,
            what="the watch recorded the early question",
        )
        assert waiting["status"] == "waiting", waiting
        deadline = datetime.fromisoformat(waiting["deadline"])

        with stalled(stack.server):
            during = await _request_all(http, stack, headers)
            ready = {
                name: (await http.get(f"{service.url}/readyz")).status_code
                for name, service in stack.services.items()
            }
            # Work for the consumers, arriving while the database is away.
            for topic, envelope in scenario.envelopes:
                await bus.publish_envelope(topic, envelope)
            question = await bus.publish(
                Topic.NOTIFICATION_EVENTS,
                NotificationType.HUMAN_INPUT,
                {"question": "Ship it?", "response_event": ANSWER_EVENT, "timeout_seconds": 1},
                correlation_id=correlation,
                tenant_id=TENANT,
                user_id="alice",
                session_id=SESSION,
            )
            gateway_log = stack.services["gateway"].log

            def gateway_waited() -> bool:
                # More waits than a retry count would allow: the batch is held, not dropped.
                text = gateway_log.read_text(errors="replace")
                return text.count("session events wait for the database") > HUB_WAITS

            await eventually(gateway_waited, timeout=60, what="the gateway's reader waits")
            await eventually(
                lambda: datetime.now(UTC) > deadline, timeout=30, what="the early question is due"
            )
            # Taken before the database resumes: the sweeper may write its row in the
            # moment between the resume and the next line after this block.
            continued = datetime.now(UTC)
        began = time.monotonic()
        recovered = {
            name: await _first_success(http, f"{service.url}{READS[name]}", headers, began)
            for name, service in stack.services.items()
        }
        green = {
            name: await _first_success(http, f"{service.url}/readyz", {}, began)
            for name, service in stack.services.items()
        }

        async def plan_tracked() -> bool:
            url = f"{stack.services['tracker'].url}/v1/tracker/plans/{scenario.plan_id}"
            response = await http.get(url, headers=headers)
            return response.status_code == 200 and response.json()["plan"]["status"] == "completed"

        await eventually(plan_tracked, timeout=60, what="the tracker applied the plan")

        async def question_kept() -> bool:
            url = f"{stack.services['gateway'].url}{READS['gateway']}"
            response = await http.get(url, headers=headers)
            return response.status_code == 200 and any(
                item["id"] == question.id for item in response.json()["items"]
            )

        await eventually(question_kept, timeout=60, what="the gateway kept the question")

        async def early_timed_out() -> dict[str, Any] | None:
            record = await _wait_record(http, stack, early, headers)
            return record if record is not None and record["status"] != "waiting" else None

        early_record = await eventually(
            early_timed_out, timeout=60, what="the sweeper timed out the early question"
        )

    # The sweeper's timeout answer, published by the outbox relay.
    timeouts = await read_envelopes(
        stack.bootstrap,
        topic_name(Topic.NOTIFICATION_EVENTS, stack.prefix),
        lambda found: (
            {correlation, early} <= {e.correlation_id for e in found if e.type == ANSWER_EVENT}
        ),
        timeout=60,
    )
    dead = await read_records(
        stack.bootstrap,
        [
            dlq_topic(topic_name(topic, stack.prefix))
            for topic in (Topic.SYSTEM_EVENTS, Topic.NOTIFICATION_EVENTS, Topic.ACTION_RESULTS)
        ],
    )

    answered = [r for r in during if isinstance(r, httpx.Response)]
    lost = len(during) - len(answered)
    print(
        f"\nstall: {len(during)} requests, {lost} lost, "
        f"{sum(r.status_code == 503 for r in answered)} answered 503; "
        "first 200 after continue: "
        + ", ".join(f"{name} {seconds:.2f}s" for name, seconds in recovered.items())
        + "; /readyz green: "
        + ", ".join(f"{name} {seconds:.2f}s" for name, seconds in green.items())
        + f"; dead-lettered: {len(dead)}"
    )
    assert lost == 0, [repr(r) for r in during if not isinstance(r, httpx.Response)]
    for response in answered:
        assert response.status_code == 503, response.text
        assert response.json()["error"]["code"] == "unavailable"
        assert set(response.json()["error"]) == {"code", "message", "details"}
        assert response.headers["retry-after"] == "1"
    assert set(ready.values()) == {503}
    assert question.correlation_id == correlation
    answers = [e.correlation_id for e in timeouts if e.type == ANSWER_EVENT]
    assert answers.count(correlation) == 1
    # The sweeper resumed where it stopped: the question due during the stall timed
    # out after it, once, and its answer went out through the outbox.
    assert answers.count(early) == 1
    assert early_record["status"] == "timed_out", early_record
    assert datetime.fromisoformat(early_record["timed_out_at"]) >= continued
    assert dead == []
