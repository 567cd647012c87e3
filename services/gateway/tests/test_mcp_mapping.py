"""The MCP door's mapping: tool names, schemas, results, forms and their answers (no I/O)."""

from __future__ import annotations

import base64
from typing import Any

import mcp_types as types
import pytest

from disco.a2a import A2AMappingError
from disco_common.a2a import ACTION_PROGRESSED, A2AAnswer, A2AArtifact, A2APart
from disco_common.a2a_cards import A2ACardSource
from disco_common.envelope import Envelope
from disco_common.notifications import HumanInputOption, HumanInputRequest
from disco_common.registry import DiscoveredCapability, DiscoveredEvent
from disco_gateway.mcp.mapping import (
    DECLINED,
    Streamed,
    answer_result,
    elicitation_form,
    form_answer,
    progress_text,
    question_result,
)
from disco_gateway.mcp.tools import agent_of, entries_of, tool_name, tool_names

_TOTAL = {"type": "object", "properties": {"total": {"type": "integer"}}}


def _capability(
    task: str, request: dict[str, Any] | None, result: dict[str, Any] | None = None
) -> DiscoveredCapability:
    answer: dict[str, Any] | None = None
    if result is not None:
        answer = {
            "type": "object",
            "properties": {"success": {}, "result": result},
            "$defs": {"Total": _TOTAL},
        }
    return DiscoveredCapability(
        task_name=task,
        description=f"does {task}",
        consumed_event=DiscoveredEvent(
            event_type=f"{task}.requested", topic="action-requests", json_schema=request
        ),
        produced_events=[
            DiscoveredEvent(event_type=f"{task}.done", topic="action-results", json_schema=answer)
        ],
    )


def _source(*capabilities: DiscoveredCapability, name: str = "calc") -> A2ACardSource:
    return A2ACardSource(
        name=name,
        description="calculates",
        version="1.2.0",
        tenant_id="acme",
        capabilities=list(capabilities),
    )


def _envelope(kind: str, data: Any, **fields: Any) -> Envelope:
    return Envelope.from_dict({"source": "test", "type": kind, "data": data, **fields})


def test_a_tool_is_named_agent_two_underscores_skill_and_splits_back() -> None:
    assert tool_name("gw-math", "add") == "gw-math__add"
    assert tool_name("billing", "invoice:create/v2") == "billing__invoice.create.v2"
    assert agent_of("my__agent__run") == "my__agent"
    assert agent_of("nothing-here") is None


def test_a_name_past_128_characters_is_cut_and_hashed_keeping_the_agent() -> None:
    long = tool_name("a" * 100, "b" * 80)
    assert len(long) == 128
    assert agent_of(long) == "a" * 100
    assert long != tool_name("a" * 100, "b" * 79 + "c")


def test_two_skills_that_would_share_a_name_get_a_hash_each() -> None:
    names = tool_names("agent", ["x:y", "x/y", "z"])
    assert names["z"] == "agent__z"
    assert names["x:y"] != names["x/y"]
    assert names["x:y"].startswith("agent__x.y-")


def test_schemas_are_the_registered_ones_and_a_non_object_is_wrapped() -> None:
    point = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    texty = {"type": "string", "$defs": {"Unused": {"type": "string"}}}
    (plain, wrapped) = entries_of(
        _source(
            _capability("plain", point, result={"$ref": "#/$defs/Total"}),
            _capability("wrapped", texty, result={"type": "integer"}),
        )
    )
    assert plain.tool.input_schema == point
    assert plain.payload({"x": 3}) == {"x": 3}
    assert plain.structured({"total": 3}) == {"total": 3}
    assert plain.tool.output_schema == {
        "$ref": "#/$defs/Total",
        "$defs": {"Total": _TOTAL},
        "type": "object",
    }
    assert plain.misfit({"total": 3}) is None
    assert wrapped.tool.input_schema["properties"]["input"] == {"type": "string"}
    assert wrapped.tool.input_schema["$defs"] == texty["$defs"]
    assert wrapped.payload({"input": "hi"}) == "hi"
    assert wrapped.tool.output_schema is not None
    assert wrapped.tool.output_schema["properties"]["result"] == {"type": "integer"}
    assert wrapped.structured(7) == {"result": 7}
    assert wrapped.misfit({"result": "seven"}) is not None
    assert plain.tool.meta == {
        "disco/agent": "calc",
        "disco/skill": "plain",
        "disco/version": "1.2.0",
        "disco/event": "plain.requested",
    }


def test_arguments_that_break_the_schema_name_the_field() -> None:
    point = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    (entry,) = entries_of(_source(_capability("plain", point)))
    with pytest.raises(A2AMappingError) as refused:
        entry.payload({"x": "three"})
    assert refused.value.violations[0]["field"] == "x"
    (wrapped,) = entries_of(_source(_capability("w", {"type": "integer"})))
    with pytest.raises(A2AMappingError, match="'input' is a required property"):
        wrapped.payload({})


def test_an_error_answer_is_an_error_result_with_its_type_and_message() -> None:
    envelope = _envelope(
        "a2a.answered",
        {"success": False, "error": {"type": "ValueError", "message": "bad city"}},
    )
    result = answer_result(envelope, None, "t-1")
    assert result.is_error is True
    assert result.content[0].text == "ValueError: bad city"  # type: ignore[union-attr]
    assert result.structured_content == {"error": {"type": "ValueError", "message": "bad city"}}


def test_an_a2a_answer_shows_what_was_streamed_then_its_parts() -> None:
    streamed = Streamed()
    for text, append in (("Once ", False), ("upon a time.", True)):
        chunk = A2AArtifact(artifact_id="story", parts=[A2APart.from_text(text)])
        streamed.add(
            _envelope(
                ACTION_PROGRESSED,
                {"sequence": 1, "artifact": chunk.model_dump(mode="json"), "append": append},
            )
        )
    answer = A2AAnswer.completed(
        A2AArtifact(
            artifact_id="book",
            parts=[
                A2APart.from_file(b"PNG", name="cover.png", media_type="image/png"),
                A2APart.from_file(b"pages", name="book.txt", media_type="text/plain"),
                A2APart.from_url("https://example.com/a.pdf"),
            ],
        ),
        result={"pages": 1},
    )
    envelope = _envelope(
        "a2a.answered",
        {"success": True, "result": {"pages": 1}, "a2a": answer.model_dump(mode="json")},
    )
    result = answer_result(envelope, None, "t-1", streamed)
    text, image, book, link = result.content
    assert isinstance(text, types.TextContent)
    assert text.text == "Once upon a time."
    assert isinstance(image, types.ImageContent)
    assert base64.b64decode(image.data) == b"PNG"
    assert isinstance(book, types.EmbeddedResource)
    assert isinstance(link, types.ResourceLink)
    assert result.structured_content == {"result": {"pages": 1}}


def test_progress_says_what_the_agent_said() -> None:
    progressed = _envelope("task.progress", {"task_id": "t", "progress": 0.5, "message": "halfway"})
    assert progress_text(progressed) == "50% halfway"
    assert progress_text(_envelope("task.started", {"task_id": "t"})) == "started"
    assert progress_text(_envelope("something.else", {})) is None


def _question(**fields: Any) -> HumanInputRequest:
    return HumanInputRequest(question="Which?", response_event="x.answered", **fields)


def test_options_are_a_choice_of_their_labels_whose_option_value_comes_back() -> None:
    form = elicitation_form(
        _question(
            options=[
                HumanInputOption(value={"approved": True}, label="Approve"),
                HumanInputOption(value={"approved": False}, label="Deny"),
            ]
        )
    )
    answer = form.params.requested_schema["properties"]["answer"]
    assert answer["enum"] == ["Approve", "Deny"]
    assert "enumNames" not in answer
    chosen = types.ElicitResult(action="accept", content={"answer": "Deny"})
    assert form_answer(form.state(), chosen) == {"approved": False}
    wrong = types.ElicitResult(action="accept", content={"answer": "Maybe"})
    assert form_answer(form.state(), wrong) is DECLINED


def test_options_with_the_same_label_are_a_choice_of_their_values_titled_by_labels() -> None:
    form = elicitation_form(
        _question(
            options=[
                HumanInputOption(value="a", label="same"),
                HumanInputOption(value={"id": 2}, label="same"),
            ]
        )
    )
    answer = form.params.requested_schema["properties"]["answer"]
    assert answer["enum"] == ["a", '{"id":2}']
    assert answer["enumNames"] == ["same", "same"]
    chosen = types.ElicitResult(action="accept", content={"answer": '{"id":2}'})
    assert form_answer(form.state(), chosen) == {"id": 2}


def test_a_flat_answer_schema_is_the_form_and_its_content_the_answer() -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name"],
    }
    form = elicitation_form(_question(answer_schema=schema))
    assert form.params.requested_schema == schema
    content = {"name": "Ada", "age": 36}
    assert (
        form_answer(form.state(), types.ElicitResult(action="accept", content=content)) == content
    )
    breaking = types.ElicitResult(action="accept", content={"age": 3})
    assert form_answer(form.state(), breaking) is DECLINED


def test_a_nested_answer_schema_asks_for_json_text() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    form = elicitation_form(_question(answer_schema=schema))
    assert form.params.requested_schema["properties"]["answer"]["type"] == "string"
    typed = types.ElicitResult(action="accept", content={"answer": "[1, 2]"})
    assert form_answer(form.state(), typed) == [1, 2]
    assert (
        form_answer(form.state(), types.ElicitResult(action="accept", content={"answer": "{"}))
        is DECLINED
    )


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_or_cancelled_form_is_declined(action: str) -> None:
    form = elicitation_form(_question())
    assert form_answer(form.state(), types.ElicitResult(action=action)) is DECLINED  # type: ignore[arg-type]


def test_a_client_without_forms_is_told_where_to_post_the_answer() -> None:
    envelope = _envelope(
        "notification.human_input",
        _question(options=[HumanInputOption(value="yes", label="Yes")]).model_dump(mode="json"),
        id="q-1",
        session_id="s-1",
    )
    result = question_result(envelope, task_id="t-1", agent="asker", public_url="https://gw")
    assert result.is_error is True
    assert result.structured_content is not None
    assert result.structured_content["answer"]["url"] == "https://gw/v1/sessions/s-1/answers/q-1"
    assert "Which?" in result.content[0].text  # type: ignore[union-attr]
