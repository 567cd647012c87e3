"""The a2a-sdk client over both bindings: send, stream, get, list, every kind of answer."""

from __future__ import annotations

import base64

import asyncpg
import pytest
from a2a.client import ClientConfig
from a2a.types import a2a_pb2
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError

from tests.e2e.gateway.conftest import (
    BINDINGS,
    PUBLIC_AGENT,
    GatewayProcess,
    GatewayStack,
    a2a_client,
)
from tests.e2e.gateway.support import as_json, events_of, kinds, send_request, user_message

pytestmark = pytest.mark.parametrize("binding", BINDINGS)

COMPLETED = a2a_pb2.TaskState.TASK_STATE_COMPLETED


async def test_a_name_sent_to_the_hello_tool_completes_with_its_greeting(
    gateway: GatewayProcess, binding: str
) -> None:
    async with a2a_client(gateway.url, binding, agent=PUBLIC_AGENT) as client:
        client._config.streaming = False  # a blocking SendMessage
        (event,) = await events_of(client, send_request(user_message({"name": "Ada"})))

    task = event.task
    assert task.status.state == COMPLETED
    (artifact,) = task.artifacts
    assert as_json(artifact.parts[0])["data"] == {"message": "Hello, Ada!"}
    assert [m.role for m in task.history] == [a2a_pb2.Role.ROLE_USER]


async def test_a_stream_of_a_tool_answering_at_once_shows_each_event_and_stores_the_task_once(
    gateway: GatewayProcess, gateway_stack: GatewayStack, binding: str
) -> None:
    async with a2a_client(gateway.url, binding, agent=PUBLIC_AGENT) as client:
        events = await events_of(client, send_request(user_message({"name": "Ada"})))
        task_id = events[0].task.id
        stored = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))

    # What the a2a-sdk streams when it follows the task itself...
    assert kinds(events) == ["task", "artifact_update", "status_update"]
    submitted = events[0].task
    assert submitted.status.state == a2a_pb2.TaskState.TASK_STATE_SUBMITTED
    assert [as_json(part) for part in submitted.history[0].parts] == [{"data": {"name": "Ada"}}]
    assert as_json(events[1].artifact_update.artifact.parts[0])["data"] == {
        "message": "Hello, Ada!"
    }
    assert events[2].status_update.status.state == COMPLETED
    assert stored.status.state == COMPLETED
    assert [m.role for m in stored.history] == [a2a_pb2.Role.ROLE_USER]
    # ...from one write of the task as it ended, with no event log nobody could read.
    admin = await asyncpg.connect(gateway_stack.database_admin)
    try:
        version = await admin.fetchval(
            "SELECT version FROM gateway.a2a_tasks WHERE task_id = $1", task_id
        )
        logged = await admin.fetchval(
            "SELECT count(*) FROM gateway.a2a_task_events WHERE task_id = $1", task_id
        )
    finally:
        await admin.close()
    assert (version, logged) == (1, 0)


async def test_a_stream_shows_status_updates_chunks_and_files_as_they_come(
    gateway: GatewayProcess, binding: str
) -> None:
    async with a2a_client(gateway.url, binding, agent="gw-story") as client:
        events = await events_of(client, send_request(user_message("dragons")))
        task_id = events[0].task.id
        stored = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))

    assert kinds(events) == [
        "task",
        "status_update",
        "artifact_update",
        "artifact_update",
        "artifact_update",
        "status_update",
    ]
    assert events[1].status_update.status.state == a2a_pb2.TaskState.TASK_STATE_WORKING
    assert events[1].status_update.status.message.parts[0].text == "Thinking of a story..."
    first, second = events[2].artifact_update, events[3].artifact_update
    assert (first.append, first.last_chunk, second.append, second.last_chunk) == (
        False,
        False,
        True,
        True,
    )
    assert events[-1].status_update.status.state == COMPLETED
    story, book = stored.artifacts
    assert [part.text for part in story.parts] == ["Once ", "upon a time."]
    raw, url, data = book.parts
    assert raw.raw == b"Once upon a time."
    assert (raw.filename, raw.media_type) == ("story.txt", "text/plain")
    assert url.url == "https://example.com/cover.png"
    assert as_json(data)["data"] == {"words": 4, "about": "dragons"}
    assert base64.b64decode(as_json(raw)["raw"]) == b"Once upon a time."


async def test_tasks_are_got_and_listed_by_context_page_after_page(
    gateway: GatewayProcess, binding: str
) -> None:
    async with a2a_client(gateway.url, binding, agent="gw-echo") as client:
        client._config.streaming = False
        (first,) = await events_of(client, send_request(user_message("one")))
        context_id = first.task.context_id
        (second,) = await events_of(
            client, send_request(user_message("two", context_id=context_id))
        )
        got = await client.get_task(a2a_pb2.GetTaskRequest(id=second.task.id, history_length=0))
        page_one = await client.list_tasks(
            a2a_pb2.ListTasksRequest(context_id=context_id, page_size=1, include_artifacts=True)
        )
        page_two = await client.list_tasks(
            a2a_pb2.ListTasksRequest(
                context_id=context_id, page_size=1, page_token=page_one.next_page_token
            )
        )
        done = await client.list_tasks(
            a2a_pb2.ListTasksRequest(context_id=context_id, status=COMPLETED)
        )

    assert second.task.context_id == context_id
    assert got.status.state == COMPLETED
    assert list(got.history) == []
    assert page_one.total_size == 2
    assert [t.id for t in page_one.tasks] == [second.task.id]
    assert page_one.tasks[0].artifacts
    assert [t.id for t in page_two.tasks] == [first.task.id]
    assert not page_two.tasks[0].artifacts
    assert page_two.next_page_token == ""
    assert {t.id for t in done.tasks} == {first.task.id, second.task.id}


async def test_a_failing_tool_fails_the_task_with_its_error(
    gateway: GatewayProcess, binding: str
) -> None:
    async with a2a_client(gateway.url, binding, agent="gw-fail") as client:
        events = await events_of(client, send_request(user_message("no way")))

    status = events[-1].status_update.status
    assert status.state == a2a_pb2.TaskState.TASK_STATE_FAILED
    assert status.message.parts[0].text == "the tool refuses: no way"
    assert as_json(status.message.parts[1])["data"]["error"]["type"] == "RuntimeError"


async def test_a_payload_breaking_the_schema_is_invalid_params_naming_the_field(
    gateway: GatewayProcess, binding: str
) -> None:
    async with a2a_client(gateway.url, binding, agent="gw-strict") as client:
        with pytest.raises(InvalidParamsError) as refused:
            await events_of(
                client, send_request(user_message({"name": "Bartholomew Q", "count": 2}))
            )
        with pytest.raises(InvalidParamsError) as missing:
            await events_of(client, send_request(user_message({"name": "Ada"})))

    assert "name:" in refused.value.message
    assert "count" in missing.value.message


async def test_an_agent_may_answer_with_a_direct_message(
    gateway: GatewayProcess, binding: str
) -> None:
    async with a2a_client(gateway.url, binding, agent="gw-greet") as client:
        (event,) = await events_of(client, send_request(user_message("Grace")))

    assert event.WhichOneof("payload") == "message"
    assert event.message.role == a2a_pb2.Role.ROLE_AGENT
    assert event.message.parts[0].text == "Hi Grace!"


async def test_a_tool_asking_for_input_continues_with_the_next_message_or_rejects(
    gateway: GatewayProcess, binding: str
) -> None:
    async with a2a_client(gateway.url, binding, agent="gw-city") as client:
        asked = await events_of(client, send_request(user_message("the weather, please")))
        task = asked[0].task
        question = asked[-1].status_update.status
        answered = await events_of(
            client,
            send_request(
                user_message("city:Atlantis", task_id=task.id, context_id=task.context_id)
            ),
        )
        refused = await events_of(client, send_request(user_message("city:Mordor")))
        stored = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id))

    assert question.state == a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED
    assert question.message.parts[0].text == "Which city? Answer with city:<name>."
    assert answered[-1].status_update.status.state == COMPLETED
    assert as_json(stored.artifacts[-1].parts[0])["data"] == {"city": "Atlantis", "sky": "clear"}
    assert [m.parts[0].text for m in stored.history if m.role == a2a_pb2.Role.ROLE_USER] == [
        "the weather, please",
        "city:Atlantis",
    ]
    rejection = refused[-1].status_update.status
    assert rejection.state == a2a_pb2.TaskState.TASK_STATE_REJECTED
    assert rejection.message.parts[0].text == "One does not simply forecast Mordor."


async def test_the_skill_is_chosen_by_the_messages_metadata(
    gateway: GatewayProcess, binding: str
) -> None:
    numbers = {"a": 3, "b": 4}
    async with a2a_client(gateway.url, binding, agent="gw-math") as client:
        with pytest.raises(InvalidParamsError) as unnamed:
            await events_of(client, send_request(user_message(numbers)))
        product = await events_of(
            client, send_request(user_message(numbers, metadata={"skill": "gw.mul"}))
        )
    async with a2a_client(gateway.url, binding) as gateway_client:  # the gateway's own endpoint
        total = await events_of(
            gateway_client,
            send_request(user_message(numbers, metadata={"skill": "gw-math/gw.add"})),
        )

    assert "metadata.skill" in str(unnamed.value.data) or "skill" in unnamed.value.message
    assert as_json(product[-2].artifact_update.artifact.parts[0])["data"] == {"total": 12}
    assert as_json(total[-2].artifact_update.artifact.parts[0])["data"] == {"total": 7}


async def test_a_finished_task_takes_no_further_message(
    gateway: GatewayProcess, binding: str
) -> None:
    async with a2a_client(gateway.url, binding, agent="gw-echo") as client:
        events = await events_of(client, send_request(user_message("once")))
        task = events[0].task
        with pytest.raises(UnsupportedOperationError):
            await events_of(client, send_request(user_message("again", task_id=task.id)))


async def test_a_client_that_streams_nothing_still_gets_the_task(
    gateway: GatewayProcess, binding: str
) -> None:
    config = ClientConfig()
    del config
    async with a2a_client(gateway.url, binding, agent="gw-echo") as client:
        client._config.streaming = False
        (event,) = await events_of(client, send_request(user_message("x"), return_immediately=True))

    assert event.WhichOneof("payload") == "task"
