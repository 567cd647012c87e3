"""A2A for disco agents: answering A2A callers, and the gateway's translation helper.

An agent answers an A2A caller (someone calling it through the gateway) like
any caller; to shape what the A2A caller sees, a Tool returns (or a Worker
completes with) an :class:`A2AAnswer`::

    @tool.on_invoke("report.requested")
    async def report(request: InvocationContext[Query]) -> A2AAnswer:
        await request.update("Collecting the figures...")          # a status update
        await request.artifact(A2AArtifact(artifact_id="r", parts=[A2APart.from_text("Q1 ")]))
        await request.artifact(
            A2AArtifact(artifact_id="r", parts=[A2APart.from_text("Q2")]),
            append=True,
            last_chunk=True,
        )                                                              # chunks of one artifact
        return A2AAnswer.completed(
            A2AArtifact(
                artifact_id="pdf",
                parts=[A2APart.from_file(pdf, name="report.pdf", media_type="application/pdf")],
            )
        )

``A2AAnswer.message(...)`` answers with a direct message (no task),
``A2AAnswer.input_required(...)`` asks the caller (its next message on the task
comes back as a new request), ``A2AAnswer.rejected(...)`` and
``A2AAnswer.failed(...)`` refuse or fail. A Worker asking a human
(``task.request_human_input``) shows up as ``input-required`` too, and the
caller's next message is delivered as the human's answer.

:class:`A2AGatewayHelper` (seed 004 RF-SDK-012) holds the translation rules the
gateway applies: cards from registrations, an A2A message → an
``action-requests`` envelope, an answer → what the A2A caller sees.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import JsonValue

from disco_common.a2a import (
    A2A_MESSAGE_ATTRIBUTE,
    A2A_RESPONSE_EVENT,
    ACTION_PROGRESSED,
    A2AAnswer,
    A2AArtifact,
    A2AMessage,
    A2AMessageContext,
    A2APart,
    A2ATaskState,
    ActionProgressedData,
)
from disco_common.a2a_cards import A2AAgentCard, A2ACardSource, build_agent_card, build_gateway_card
from disco_common.envelope import ActionRequest
from disco_common.notifications import HumanInputRequest, HumanInputResponse
from disco_common.registry import DiscoveredCapability, validate_payload
from disco_common.tasks import ActionResultData
from disco_common.topics import Topic

__all__ = [
    "A2A_RESPONSE_EVENT",
    "ACTION_PROGRESSED",
    "A2AAnswer",
    "A2AArtifact",
    "A2ACardSource",
    "A2AGatewayHelper",
    "A2AMappingError",
    "A2AMessage",
    "A2AMessageContext",
    "A2APart",
    "A2ATaskState",
    "ActionProgressedData",
]

SKILL_METADATA_KEYS = ("skill", "skillId")
"""Message metadata keys that choose the skill (capability) a message asks for."""

_REQUIRED = re.compile(r"^'(?P<name>[^']+)' is a required property")


class A2AMappingError(ValueError):
    """An A2A message cannot become a request (A2A ``InvalidParams``); ``field`` says where.

    Attributes:
        field: the offending field, dotted (``name``, ``address.city``,
            ``metadata.skill``), or empty for the payload as a whole.
        violations: every problem found, as ``{"field", "message"}``.
    """

    def __init__(
        self, message: str, *, field: str = "", violations: Sequence[dict[str, str]] = ()
    ) -> None:
        super().__init__(message)
        self.field = field
        self.violations = list(violations) or [{"field": field, "message": message}]


def _dotted(pointer: str) -> str:
    return ".".join(part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:])


class A2AGatewayHelper:
    """The rules that turn A2A objects into disco envelopes and back (pure; no I/O).

    Mapping, in DESIGN's terms:

    - a card per registered agent (:meth:`agent_to_card`) and one for the gateway
      (:meth:`gateway_card`), both from :mod:`disco_common.a2a_cards`;
    - a message to agent X → an ``action-requests`` envelope for the consumed
      event of the skill the message's metadata names (``skill``), or of X's only
      capability (:meth:`choose_capability`); its payload is the message's data
      part, with its text as ``text`` (a text-only message is ``{"text": ...}``)
      and its files as ``files`` (:meth:`message_payload`); checked against the
      registered schema, naming the field that breaks it (:meth:`check_payload`);
      ``contextId`` is the envelope's ``session_id``, the task id its
      ``task_id`` and (first turn) ``correlation_id``; tenant and user are the
      caller's token's; the rest of the message (its id, metadata, extensions,
      referenced tasks, accepted output modes) is the ``a2amessage`` attribute
      (:class:`~disco_common.a2a.A2AMessageContext`) (:meth:`message_to_request`);
    - the answer → :meth:`answer_of`: the agent's :class:`A2AAnswer` when it gave
      one, else ``completed`` with an artifact (a data part, plus a text part
      when the result has ``text``) or ``failed`` with the error (``canceled``
      when the error is ``cancelled``);
    - a question to a human → ``input-required`` with the question
      (:meth:`question_parts`); the caller's next message → the human's answer
      (:meth:`human_answer`).
    """

    @staticmethod
    def agent_to_card(
        source: A2ACardSource,
        *,
        public_url: str,
        requires_token: bool = True,
        tenant: str | None = None,
        grpc_address: str | None = None,
    ) -> A2AAgentCard:
        """The A2A card of one agent (see :func:`disco_common.a2a_cards.build_agent_card`)."""
        return build_agent_card(
            source,
            public_url=public_url,
            requires_token=requires_token,
            tenant=tenant,
            grpc_address=grpc_address,
        )

    @staticmethod
    def gateway_card(
        sources: Sequence[A2ACardSource],
        *,
        public_url: str,
        tenant: str | None = None,
        grpc_address: str | None = None,
    ) -> A2AAgentCard:
        """The gateway's card listing ``sources`` (see :mod:`disco_common.a2a_cards`)."""
        return build_gateway_card(
            sources, public_url=public_url, tenant=tenant, grpc_address=grpc_address
        )

    @staticmethod
    def requested_skill(message: A2AMessage) -> str | None:
        """The skill the message's metadata names, if any."""
        for key in SKILL_METADATA_KEYS:
            value = (message.metadata or {}).get(key)
            if isinstance(value, str) and value:
                return value
        return None

    @staticmethod
    def choose_capability(source: A2ACardSource, skill: str | None) -> DiscoveredCapability:
        """The capability ``skill`` names (``task`` or ``agent/task``), or the agent's only one.

        Raises:
            A2AMappingError: no such skill, or several and none named (the message lists them).
        """
        known = [capability.task_name for capability in source.capabilities]
        if skill is not None:
            name = skill.split("/", 1)[1] if skill.startswith(f"{source.name}/") else skill
            for capability in source.capabilities:
                if capability.task_name == name:
                    return capability
            raise A2AMappingError(
                f"agent {source.name!r} has no skill {skill!r}; its skills: {known}",
                field="metadata.skill",
            )
        if len(source.capabilities) == 1:
            return source.capabilities[0]
        if not source.capabilities:
            raise A2AMappingError(f"agent {source.name!r} offers no skill to call")
        raise A2AMappingError(
            f"agent {source.name!r} has several skills: name one in the message's metadata "
            f'("skill": one of {known})',
            field="metadata.skill",
        )

    @staticmethod
    def message_payload(message: A2AMessage) -> JsonValue:
        """The request payload a message carries.

        Its data part is the payload (an object, unless it is the only part);
        its text parts, joined, are ``text`` and its file parts ``files``. A
        message of text only is ``{"text": ...}``.

        Raises:
            A2AMappingError: several data parts, or a data part that is not an
                object beside other parts.
        """
        data = [part.data for part in message.parts if part.data is not None]
        texts = [part.text for part in message.parts if part.text is not None]
        files = [
            part.model_dump(
                mode="json", exclude_none=True, include={"raw", "url", "filename", "media_type"}
            )
            for part in message.parts
            if part.kind == "file"
        ]
        if len(data) > 1:
            raise A2AMappingError(
                "a message carries at most one data part (the request's payload)", field="parts"
            )
        if data and not texts and not files:
            return data[0]
        payload: dict[str, JsonValue] = {}
        if data:
            if not isinstance(data[0], dict):
                raise A2AMappingError(
                    "beside text or files, the data part must be a JSON object (the payload)",
                    field="parts",
                )
            payload.update(data[0])
        if texts:
            payload.setdefault("text", "\n".join(texts))
        if files:
            payload.setdefault("files", files)  # type: ignore[arg-type]
        return payload

    @staticmethod
    def check_payload(capability: DiscoveredCapability, payload: JsonValue) -> None:
        """Check ``payload`` against the capability's registered request schema (if any).

        Raises:
            A2AMappingError: naming the first offending field, with every violation.
        """
        schema = capability.consumed_event.json_schema
        if schema is None:
            return
        result = validate_payload(schema, payload)
        if result.valid:
            return
        violations: list[dict[str, str]] = []
        for violation in result.violations:
            field = _dotted(violation.path)
            match = _REQUIRED.match(violation.message)
            if violation.validator == "required" and match is not None:
                field = f"{field}.{match['name']}" if field else match["name"]
            violations.append({"field": field or "(payload)", "message": violation.message})
        first = violations[0]
        raise A2AMappingError(
            f"the message does not fit the request of {capability.task_name!r}: "
            f"{first['field']}: {first['message']}",
            field=first["field"],
            violations=violations,
        )

    @staticmethod
    def message_to_request(
        message: A2AMessage,
        capability: DiscoveredCapability,
        *,
        task_id: str,
        context_id: str,
        correlation_id: str,
        tenant_id: str,
        user_id: str,
        source: str,
        id: str | None = None,
        payload: JsonValue = None,
        a2a: A2AMessageContext | None = None,
    ) -> ActionRequest:
        """The ``action-requests`` envelope of a message (its payload checked first).

        ``a2a`` (default: the context of ``message`` alone) is what the agent is told of
        the caller's message: the :data:`~disco_common.a2a.A2A_MESSAGE_ATTRIBUTE`
        extension attribute.

        Raises:
            A2AMappingError: the payload breaks the registered schema, or the
                message cannot become a payload.
        """
        if payload is None:
            payload = A2AGatewayHelper.message_payload(message)
        A2AGatewayHelper.check_payload(capability, payload)
        fields: dict[str, JsonValue] = {
            "source": source,
            "type": capability.consumed_event.event_type,
            "data": payload,
            "correlation_id": correlation_id,
            "task_id": task_id,
            "session_id": context_id,
            "tenant_id": tenant_id,
            "user_id": user_id,
            "response_event": A2A_RESPONSE_EVENT,
            "response_topic": Topic.ACTION_RESULTS.value,
            A2A_MESSAGE_ATTRIBUTE: (a2a or A2AMessageContext.of_message(message)).to_attribute(),
        }
        if id is not None:
            fields["id"] = id
        return ActionRequest.from_dict(fields)

    @staticmethod
    def answer_of(result: ActionResultData, *, artifact_id: str) -> A2AAnswer:
        """What an A2A caller sees of an agent's answer.

        The agent's own :class:`A2AAnswer` when it gave one (a completed one with
        no artifact shows its ``result`` as one); otherwise a success
        is ``completed`` with one artifact ``artifact_id`` (a data part with the
        result, plus a text part when the result has ``text``; a text result is
        a text part), and a failure is ``failed`` (``canceled`` for the error
        ``cancelled``) with the error's message and the error as data.
        """
        answer = result.a2a
        if answer is not None:
            if answer.kind == "task" and answer.succeeded and not answer.artifacts:
                # A completed answer carrying only its plain result shows it as an artifact.
                parts = _result_parts(answer.result)
                if parts:
                    artifact = A2AArtifact(artifact_id=artifact_id, name="result", parts=parts)
                    return answer.model_copy(update={"artifacts": [artifact]})
            return answer
        if result.success:
            parts = _result_parts(result.result)
            artifacts = (
                [A2AArtifact(artifact_id=artifact_id, name="result", parts=parts)] if parts else []
            )
            return A2AAnswer(
                state=A2ATaskState.COMPLETED, artifacts=artifacts, result=result.result
            )
        error = result.error
        assert error is not None
        state = A2ATaskState.CANCELED if error.type == "cancelled" else A2ATaskState.FAILED
        return A2AAnswer(
            state=state,
            parts=[
                A2APart.from_text(error.message or error.type),
                A2APart.from_data({"error": error.model_dump(mode="json", exclude_none=True)}),
            ],
        )

    @staticmethod
    def question_parts(question: HumanInputRequest) -> list[A2APart]:
        """An ``input-required`` status message for a question to a human.

        The question as text, and (when there are any) its options, answer
        schema and timeout as data.
        """
        parts = [A2APart.from_text(question.question)]
        details: dict[str, JsonValue] = {}
        if question.options:
            details["options"] = [option.model_dump(mode="json") for option in question.options]
        if question.answer_schema is not None:
            details["answer_schema"] = question.answer_schema
        if question.timeout_seconds is not None:
            details["timeout_seconds"] = question.timeout_seconds
        if details:
            parts.append(A2APart.from_data(details))
        return parts

    @staticmethod
    def human_answer(
        message: A2AMessage,
        *,
        request_id: str | None,
        task_id: str | None,
        user_id: str | None,
    ) -> HumanInputResponse:
        """The human's answer a caller's message gives: its data part, else its text."""
        data = [part.data for part in message.parts if part.data is not None]
        answer: JsonValue = data[0] if data else message.text()
        return HumanInputResponse(
            answer=answer, request_id=request_id, task_id=task_id, answered_by=user_id
        )


def _result_parts(result: JsonValue) -> list[A2APart]:
    if result is None:
        return []
    if isinstance(result, str):
        return [A2APart.from_text(result)]
    parts = [A2APart.from_data(result)]
    if isinstance(result, dict) and isinstance(result.get("text"), str):
        parts.append(A2APart.from_text(str(result["text"])))
    return parts
