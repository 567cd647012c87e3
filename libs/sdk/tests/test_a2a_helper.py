"""A2AGatewayHelper: the rules from an A2A message to a request, and from an answer back."""

from __future__ import annotations

import pytest

from disco.a2a import A2AAnswer, A2AGatewayHelper, A2AMappingError, A2AMessage, A2APart
from disco_common.a2a import A2ARole, A2ATaskState
from disco_common.a2a_cards import A2ACardSource
from disco_common.registry import DiscoveredCapability, DiscoveredEvent
from disco_common.tasks import ActionResultData, ErrorInfo

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 5},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    "required": ["name"],
}


def capability(name: str, schema: dict[str, object] | None = None) -> DiscoveredCapability:
    return DiscoveredCapability(
        task_name=name,
        consumed_event=DiscoveredEvent(
            event_type=f"{name}.requested", topic="action-requests", json_schema=schema
        ),
    )


SOURCE = A2ACardSource(
    name="agent", tenant_id="acme", capabilities=[capability("a", SCHEMA), capability("b")]
)


def message(*parts: A2APart, metadata: dict[str, object] | None = None) -> A2AMessage:
    return A2AMessage(message_id="m", role=A2ARole.USER, parts=list(parts), metadata=metadata)  # type: ignore[arg-type]


def test_text_is_text_data_is_the_payload_and_both_merge() -> None:
    assert A2AGatewayHelper.message_payload(message(A2APart.from_text("hi"))) == {"text": "hi"}
    assert A2AGatewayHelper.message_payload(message(A2APart.from_data([1, 2]))) == [1, 2]
    merged = A2AGatewayHelper.message_payload(
        message(
            A2APart.from_data({"name": "x"}),
            A2APart.from_text("note"),
            A2APart.from_url("https://f/x"),
        )
    )
    assert merged == {"name": "x", "text": "note", "files": [{"url": "https://f/x"}]}
    with pytest.raises(A2AMappingError):
        A2AGatewayHelper.message_payload(message(A2APart.from_data(1), A2APart.from_text("x")))


def test_the_skill_comes_from_the_metadata_or_is_the_only_one() -> None:
    assert A2AGatewayHelper.choose_capability(SOURCE, "b").task_name == "b"
    assert A2AGatewayHelper.choose_capability(SOURCE, "agent/a").task_name == "a"
    with pytest.raises(A2AMappingError, match="several skills") as several:
        A2AGatewayHelper.choose_capability(SOURCE, None)
    with pytest.raises(A2AMappingError, match="no skill"):
        A2AGatewayHelper.choose_capability(SOURCE, "c")
    assert several.value.field == "metadata.skill"
    assert (
        A2AGatewayHelper.requested_skill(message(A2APart.from_text("x"), metadata={"skill": "b"}))
        == "b"
    )


@pytest.mark.parametrize(
    ("payload", "field"),
    [({}, "name"), ({"name": "toolong"}, "name"), ({"name": "a", "address": {}}, "address.city")],
)
def test_a_payload_breaking_the_schema_names_the_field(
    payload: dict[str, object], field: str
) -> None:
    with pytest.raises(A2AMappingError) as refused:
        A2AGatewayHelper.check_payload(capability("a", SCHEMA), payload)

    assert refused.value.field == field
    assert field in str(refused.value)


def test_a_message_becomes_a_request_in_the_callers_scope() -> None:
    request = A2AGatewayHelper.message_to_request(
        message(A2APart.from_data({"name": "Ada"})),
        capability("a", SCHEMA),
        task_id="t1",
        context_id="c1",
        correlation_id="t1",
        tenant_id="acme",
        user_id="alice",
        source="disco://service/gateway",
    )

    assert (request.type, request.data, request.session_id, request.task_id) == (
        "a.requested",
        {"name": "Ada"},
        "c1",
        "t1",
    )
    assert (request.tenant_id, request.user_id, request.response_event) == (
        "acme",
        "alice",
        "a2a.answered",
    )


def test_answers_are_the_agents_own_or_completed_or_failed() -> None:
    plain = A2AGatewayHelper.answer_of(ActionResultData.ok("done"), artifact_id="r")
    failed = A2AGatewayHelper.answer_of(
        ActionResultData.failed(ErrorInfo(type="X", message="no")), artifact_id="r"
    )
    own = A2AGatewayHelper.answer_of(
        ActionResultData.of_answer(A2AAnswer.rejected("nope")), artifact_id="r"
    )

    assert plain.state is A2ATaskState.COMPLETED
    assert plain.artifacts[0].parts[0].text == "done"
    assert failed.state is A2ATaskState.FAILED
    assert failed.text() == "no"
    assert own.state is A2ATaskState.REJECTED
