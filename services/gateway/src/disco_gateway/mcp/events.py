"""What the MCP door publishes besides a call's request: a human's answer, and a cancel.

A question a call's agent asked (:class:`Asked`) travels with the MCP client
between the call's two legs, sealed: inside a 2026-07-28 ``requestState`` (the
SDK seals it), or as the id of a 2025 ``elicitation/create`` request
(:class:`AskSeal`), so that the answer can come back to any instance, which
publishes it (:func:`publish_answer`) as a person's answer through the gateway's
session routes would be.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from mcp.server.request_state import InvalidRequestState, RequestStateCodec
from pydantic import JsonValue

from disco.bus import BusClient
from disco_common.notifications import HumanInputResponse
from disco_common.system_events import SystemEventType, TaskCancelRequestedData
from disco_common.topics import Topic
from disco_gateway.a2a.runtime import A2ARuntime
from disco_gateway.mcp.mapping import Declined
from disco_gateway.scope import CallScope
from disco_gateway.tasks.repository import TurnRow

__all__ = ["ASK_PREFIX", "AskSeal", "Asked", "announce_cancel", "publish_answer"]

ASK_PREFIX = "disco-ask."
"""How the id of an ``elicitation/create`` the gateway sent starts (the rest is sealed)."""


@dataclass(frozen=True)
class Asked:
    """A question a call's agent asked, and what is needed to answer it from anywhere.

    Attributes:
        turn: the task's turn that asked (its ids, agent and skill).
        question: what the turn remembers of the question (its envelope id, correlation
            id and response event, :func:`disco_gateway.a2a.mapping.question_of`).
        form: how the form's content becomes the answer (:meth:`~.mapping.Form.state`).
        tenant_id: the tenant the call runs in.
        expires_at: when an answer is no longer taken (epoch seconds).
    """

    turn: dict[str, Any]
    question: dict[str, Any]
    form: dict[str, Any]
    tenant_id: str
    expires_at: float = field(default=0.0)

    @classmethod
    def of(
        cls,
        turn: TurnRow,
        question: dict[str, Any],
        form: dict[str, Any],
        *,
        tenant_id: str,
        seconds: float,
    ) -> Asked:
        kept = {**asdict(turn), "message": {}, "question": None}
        return cls(kept, question, form, tenant_id, time.time() + seconds)

    @property
    def task_id(self) -> str:
        return str(self.turn["task_id"])

    def turn_row(self) -> TurnRow:
        """The turn that asked (without its message)."""
        return TurnRow(**{**self.turn, "question": self.question})

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, text: str) -> Asked:
        """Raises: ValueError: not a question this gateway sealed (or it expired)."""
        try:
            asked = cls(**json.loads(text))
            TurnRow(**asked.turn)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a question the gateway asked: {exc}") from None
        if asked.expires_at and time.time() > asked.expires_at:
            raise ValueError("the question is no longer open")
        return asked


class AskSeal:
    """Seals an :class:`Asked` into the id of an ``elicitation/create`` request, and opens it
    (the codec the SDK seals 2026-07-28 state with)."""

    def __init__(self, codec: RequestStateCodec) -> None:
        self._codec = codec

    def seal(self, asked: Asked) -> str:
        return ASK_PREFIX + self._codec.seal(asked.dump().encode())

    def open(self, request_id: object) -> Asked | None:
        """The question an elicitation's id names (None: not one the gateway sealed, or over)."""
        if not isinstance(request_id, str) or not request_id.startswith(ASK_PREFIX):
            return None
        try:
            return Asked.load(self._codec.unseal(request_id[len(ASK_PREFIX) :]).decode())
        except (InvalidRequestState, ValueError, UnicodeDecodeError):
            return None


async def publish_answer(
    runtime: A2ARuntime, scope: CallScope, asked: Asked, answer: JsonValue | Declined
) -> None:
    """Publish the human's answer to ``asked`` (:data:`~.mapping.DECLINED`: nobody
    answers, the agent's timeout path), as the question asks; the task's turn no longer
    waits on it."""
    declined = isinstance(answer, Declined)
    question = asked.question
    correlation_id = str(question["correlation_id"])
    response = HumanInputResponse(
        answer=None if isinstance(answer, Declined) else answer,
        timed_out=declined,
        request_id=question.get("request_id"),
        task_id=asked.task_id,
        answered_by=scope.user_id,
    )
    turn = asked.turn_row()
    await runtime.bus.publish(
        Topic.NOTIFICATION_EVENTS,
        str(question["response_event"]),
        response.model_dump(mode="json", exclude_none=True),
        correlation_id=correlation_id,
        task_id=asked.task_id,
        session_id=turn.context_id,
        tenant_id=scope.tenant_id,
        user_id=scope.user_id,
        # The A2A path answers with the same id: whichever comes second is a duplicate.
        id=f"{correlation_id}.answer",
    )
    await runtime.remember_question(scope.tenant_id, turn, None)


async def announce_cancel(bus: BusClient, scope: CallScope, task_id: str, reason: str) -> None:
    """Ask the agent to stop ``task_id`` (``task.cancel_requested``)."""
    await bus.publish(
        Topic.SYSTEM_EVENTS,
        SystemEventType.TASK_CANCEL_REQUESTED.value,
        TaskCancelRequestedData(task_id=task_id, reason=reason, requested_by=scope.user_id),
        correlation_id=task_id,
        task_id=task_id,
        tenant_id=scope.tenant_id,
        user_id=scope.user_id,
        id=f"{task_id}.cancel",
    )
