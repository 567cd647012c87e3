"""disco_common.a2a speaks the specification's JSON: every model survives a2a-sdk's own types."""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.types import a2a_pb2
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message
from pydantic import BaseModel

from disco_common.a2a import (
    A2A_MESSAGE_ATTRIBUTE,
    A2AAnswer,
    A2AArtifact,
    A2AMessage,
    A2AMessageContext,
    A2APart,
    A2ARole,
    A2ATask,
    A2ATaskArtifactUpdateEvent,
    A2ATaskState,
    A2ATaskStatus,
    A2ATaskStatusUpdateEvent,
    ActionProgressedData,
    a2a_state_for,
    disco_status_for,
)
from disco_common.a2a_cards import (
    A2A_EVENT_CONTRACTS_EXTENSION,
    A2AAgentCardSignature,
    A2ACardSource,
    build_agent_card,
    build_gateway_card,
)
from disco_common.envelope import ActionRequest, Envelope
from disco_common.registry import DiscoveredCapability, DiscoveredEvent
from disco_common.tasks import ActionResultData, TaskStatus

MESSAGE = A2AMessage(
    message_id="msg-1",
    role=A2ARole.USER,
    parts=[
        A2APart.from_text("What is the weather in Atlantis?"),
        A2APart.from_data({"city": "Atlantis", "days": 3, "nested": {"ok": True}}),
        A2APart.from_file(b"\x00\x01binary", name="a.bin", media_type="application/x-bin"),
        A2APart.from_url("https://example.com/map.png", name="map", media_type="image/png"),
    ],
    context_id="ctx-1",
    task_id="task-1",
    metadata={"skill": "weather"},
)
ARTIFACT = A2AArtifact(
    artifact_id="art-1",
    name="forecast",
    description="three days",
    parts=[A2APart.from_text("sunny"), A2APart.from_data([1, 2, 3])],
    metadata={"unit": "celsius"},
)
STATUS = A2ATaskStatus(state=A2ATaskState.INPUT_REQUIRED, message=MESSAGE)
TASK = A2ATask(
    id="task-1",
    context_id="ctx-1",
    status=STATUS,
    artifacts=[ARTIFACT],
    history=[MESSAGE],
    metadata={"agent": "weather"},
)
SOURCE = A2ACardSource(
    name="weather",
    description="Forecasts",
    version="1.2.0",
    tags=["forecast"],
    tenant_id="acme",
    capabilities=[
        DiscoveredCapability(
            task_name="weather",
            description="Tells the weather",
            consumed_event=DiscoveredEvent(
                event_type="weather.requested",
                topic="action-requests",
                json_schema={
                    "type": "object",
                    "properties": {"text": {"type": "string", "maxLength": 10}},
                    "required": ["text"],
                },
            ),
            produced_events=[
                DiscoveredEvent(event_type="weather.completed", topic="action-results")
            ],
        )
    ],
)

PAIRS: list[tuple[BaseModel, type[Message]]] = [
    (MESSAGE, a2a_pb2.Message),
    *[(part, a2a_pb2.Part) for part in MESSAGE.parts],
    (ARTIFACT, a2a_pb2.Artifact),
    (STATUS, a2a_pb2.TaskStatus),
    (TASK, a2a_pb2.Task),
    (
        A2ATaskStatusUpdateEvent(task_id="task-1", context_id="ctx-1", status=STATUS),
        a2a_pb2.TaskStatusUpdateEvent,
    ),
    (
        A2ATaskArtifactUpdateEvent(
            task_id="task-1", context_id="ctx-1", artifact=ARTIFACT, append=True, last_chunk=True
        ),
        a2a_pb2.TaskArtifactUpdateEvent,
    ),
    (build_agent_card(SOURCE, public_url="https://gw.example", tenant="acme"), a2a_pb2.AgentCard),
    (
        build_agent_card(SOURCE, public_url="https://gw.example", grpc_address="gw.example:8090"),
        a2a_pb2.AgentCard,
    ),
    (build_gateway_card([SOURCE], public_url="https://gw.example"), a2a_pb2.AgentCard),
    (
        build_gateway_card([SOURCE], public_url="https://gw.example").model_copy(
            update={
                "signatures": [
                    A2AAgentCardSignature(
                        protected="eyJhbGciOiJFUzI1NiJ9", signature="c2ln", header={"k": "v"}
                    )
                ]
            }
        ),
        a2a_pb2.AgentCard,
    ),
]


def _wire(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.mark.parametrize(("model", "proto"), PAIRS, ids=lambda v: getattr(v, "__name__", ""))
def test_each_model_parses_as_the_sdks_type_and_comes_back_equal(
    model: BaseModel, proto: type[Message]
) -> None:
    parsed = ParseDict(_wire(model), proto())  # fails on any name or value the SDK does not know
    back = type(model).model_validate(MessageToDict(parsed))

    assert back == model


def test_task_states_are_the_sdks_enum_names() -> None:
    names = set(a2a_pb2.TaskState.keys()) - {"TASK_STATE_UNSPECIFIED"}

    assert {state.value for state in A2ATaskState} == names
    assert {role.value for role in A2ARole} == set(a2a_pb2.Role.keys()) - {"ROLE_UNSPECIFIED"}


@pytest.mark.parametrize(
    ("status", "state"),
    [
        (TaskStatus.PENDING, A2ATaskState.SUBMITTED),
        (TaskStatus.RUNNING, A2ATaskState.WORKING),
        (TaskStatus.WAITING, A2ATaskState.WORKING),
        (TaskStatus.AWAITING_INPUT, A2ATaskState.INPUT_REQUIRED),
        (TaskStatus.COMPLETED, A2ATaskState.COMPLETED),
        (TaskStatus.FAILED, A2ATaskState.FAILED),
    ],
)
def test_every_disco_task_status_has_an_a2a_state(status: TaskStatus, state: A2ATaskState) -> None:
    assert a2a_state_for(status) is state
    assert TaskStatus(disco_status_for(state)) is status or status is TaskStatus.WAITING


def test_a_part_carries_exactly_one_kind_of_content() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        A2APart(text="a", data={"b": 1})
    with pytest.raises(ValueError, match="exactly one"):
        A2APart()
    assert A2APart.from_file(b"abc").raw_bytes() == b"abc"


def test_a_card_requires_the_bearer_token_unless_the_agent_is_public() -> None:
    guarded = build_agent_card(SOURCE, public_url="https://gw.example/")
    open_card = build_agent_card(SOURCE, public_url="https://gw.example/", requires_token=False)

    assert guarded.security_requirements is not None
    assert open_card.security_requirements is None
    assert open_card.security_schemes == guarded.security_schemes
    sdk_card = parse_agent_card(_wire(guarded))
    assert [i.url for i in sdk_card.supported_interfaces] == [
        "https://gw.example/a2a/weather",
        "https://gw.example/a2a/weather",
    ]
    assert {i.protocol_binding for i in sdk_card.supported_interfaces} == {"JSONRPC", "HTTP+JSON"}
    assert sdk_card.capabilities.streaming
    assert sdk_card.capabilities.push_notifications


def test_a_grpc_interface_names_the_agent_in_its_tenant_field() -> None:
    agent = build_agent_card(
        SOURCE, public_url="https://gw.example", tenant="acme", grpc_address="gw.example:8090"
    )
    gateway = build_gateway_card([SOURCE], public_url="https://gw.example", grpc_address="g:1")
    without = build_agent_card(SOURCE, public_url="https://gw.example")

    assert [(i.protocol_binding, i.url, i.tenant) for i in agent.supported_interfaces] == [
        ("JSONRPC", f"https://gw.example/a2a/{SOURCE.name}", "acme"),
        ("HTTP+JSON", f"https://gw.example/a2a/{SOURCE.name}", "acme"),
        ("GRPC", "gw.example:8090", SOURCE.name),
    ]
    assert [(i.protocol_binding, i.tenant) for i in gateway.supported_interfaces][-1] == (
        "GRPC",
        None,
    )
    assert [i.protocol_binding for i in without.supported_interfaces] == ["JSONRPC", "HTTP+JSON"]


def test_a_card_carries_each_skills_input_and_output_schemas() -> None:
    card = build_agent_card(SOURCE, public_url="https://gw.example")
    extensions = card.capabilities.extensions or []
    contracts = next(e for e in extensions if e.uri == A2A_EVENT_CONTRACTS_EXTENSION)

    assert contracts.params is not None
    skill = contracts.params["skills"]["weather"]  # type: ignore[index,call-overload]
    assert skill["request"]["json_schema"]["properties"]["text"]["maxLength"] == 10  # type: ignore[index]
    assert [s.id for s in card.skills] == ["weather"]


def test_an_answer_reads_as_a_disco_result_too() -> None:
    done = ActionResultData.of_answer(A2AAnswer.completed(ARTIFACT))
    asked = ActionResultData.of_answer(A2AAnswer.input_required("Which city?"))
    refused = ActionResultData.of_answer(A2AAnswer.rejected("not my job"))
    direct = ActionResultData.of_answer(A2AAnswer.message("hi"))

    assert done.success
    assert done.result == [1, 2, 3]
    assert not asked.success
    assert asked.error is not None
    assert asked.error.type == "input_required"
    assert asked.error.message == "Which city?"
    assert not refused.success
    assert refused.error is not None
    assert refused.error.type == "rejected"
    assert direct.success
    assert direct.result == {"text": "hi"}
    restored = ActionResultData.model_validate(done.model_dump(mode="json"))
    assert restored.a2a == done.a2a


def test_a_message_answer_carries_no_task_state() -> None:
    with pytest.raises(ValueError, match="no artifacts"):
        A2AAnswer(kind="message", parts=[A2APart.from_text("x")], artifacts=[ARTIFACT])
    with pytest.raises(ValueError, match="status message or an artifact"):
        ActionProgressedData(sequence=1)


def test_the_message_context_travels_as_a_string_attribute_in_both_cloudevents_modes() -> None:
    context = A2AMessageContext.of_message(
        MESSAGE.model_copy(update={"extensions": ["urn:x"], "reference_task_ids": ["t-0"]}),
        accepted_output_modes=["text/plain", "application/json"],
        requested_extensions=["urn:x", "urn:y"],
    )
    request = ActionRequest.from_dict(
        {
            "source": "disco://service/gateway/a2a",
            "type": "weather.requested",
            "response_event": "a2a.answered",
            "data": {"city": "Atlantis"},
            A2A_MESSAGE_ATTRIBUTE: context.to_attribute(),
        }
    )

    structured = json.loads(request.to_kafka_value())
    # A CloudEvents extension value is a string: the context's own JSON, camelCase.
    assert json.loads(structured["a2amessage"]) == {
        "messageId": "msg-1",
        "metadata": {"skill": "weather"},
        "extensions": ["urn:x"],
        "requestedExtensions": ["urn:x", "urn:y"],
        "referenceTaskIds": ["t-0"],
        "acceptedOutputModes": ["text/plain", "application/json"],
    }
    binary_headers = [
        ("ce_specversion", b"1.0"),
        ("ce_id", b"e-1"),
        ("ce_source", b"s"),
        ("ce_type", b"weather.requested"),
        ("ce_responseevent", b"a2a.answered"),
        ("ce_a2amessage", context.to_attribute().encode()),
        ("content-type", b"application/json"),
    ]
    binary = Envelope.from_kafka_record(b'{"city": "Atlantis"}', binary_headers)
    for envelope in (Envelope.from_kafka_value(request.to_kafka_value()), binary):
        assert A2AMessageContext.of(envelope.extensions) == context


def test_a_message_context_names_what_the_caller_accepts() -> None:
    picky = A2AMessageContext(message_id="m", accepted_output_modes=["text/*", "image/png"])
    open_minded = A2AMessageContext(message_id="m")

    assert picky.accepts("text/markdown")
    assert picky.accepts("image/png; q=1")
    assert not picky.accepts("application/json")
    assert open_minded.accepts("application/pdf")
    assert A2AMessageContext.of({}) is None
    assert A2AMessageContext.of({"a2amessage": "not json"}) is None
    with pytest.raises(ValueError, match="a2amessage"):
        A2AMessageContext.from_attribute('{"metadata": {}}')
