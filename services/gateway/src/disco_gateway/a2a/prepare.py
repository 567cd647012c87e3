"""A caller's message, made ready before the a2a-sdk takes it up: its agent, skill, payload
and turn, the turn claimed so that the same message sent again is not sent on twice.

Every message (:meth:`MessagePreparer.prepare`):

- names its agent (the endpoint's, or the one its metadata names at the
  gateway's own endpoint) and its skill; its payload is checked against the
  skill's schema (``InvalidParams`` naming the field);
- a task's next message (``taskId``) answers the question to a human the task
  waits on, or starts the task's next turn when the agent asked for input; a
  task that is working takes no message until it asks for input, and one that is
  over none at all. Without a ``contextId`` it is in the task's context (the
  specification lets a client leave it out when it names the task);
- claims its turn: a new turn is recorded (a first message's task id is derived
  from the caller and its ``messageId``, so the same message sent again finds the
  same turn), an answer takes the question. A message whose ``messageId`` the
  task has seen already is :class:`Duplicate`: the handler answers it with the
  task the first one made (:mod:`disco_gateway.a2a.replay`), on any instance.

A claim is made before anything is sent; for the commonest call, a first message
the handler's fast path sends, as part of sending it (``defer_claim``): the
turn is recorded, then the request goes out. A turn is always recorded before
its request can be answered, so that an answer always finds its turn (the
consumer group applies it to the task whoever follows it, or nobody).

A claim is never waited out. A request whose sending failed, or whose sender
died, may or may not be on the bus; so the same message sent again, finding
its turn taken while its task shows nothing of it yet, sends the turn's request
once more: the very same envelope (its id is the turn's), which agents
deduplicate. The message goes out at least once, and the agent handles it once.

A caller without a token shares a user with every other one, so its first
messages are not matched by ``messageId`` (one could find another's task by
guessing its id); its next messages are (the task id is the caller's own).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog
from a2a.server.context import ServerCallContext
from a2a.types import a2a_pb2
from a2a.utils.errors import (
    InternalError,
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import validate_history_length
from google.protobuf.json_format import MessageToDict
from pydantic import TypeAdapter, ValidationError

from disco.a2a import A2AGatewayHelper, A2AMappingError
from disco.clients import ServiceError
from disco_common.a2a import A2AMessage, A2AMessageContext, A2ATaskState
from disco_common.a2a_cards import A2ACardSource
from disco_common.ids import Id
from disco_common.registry import DiscoveredCapability
from disco_gateway.a2a.mapping import message_of, message_task_id, turn_correlation_id
from disco_gateway.a2a.required import check_required_fields
from disco_gateway.a2a.runtime import A2ARuntime
from disco_gateway.errors import no_agent_message
from disco_gateway.scope import CallScope
from disco_gateway.tasks.repository import TaskRow, TurnRow

__all__ = ["TARGET_KEY", "Claim", "Duplicate", "MessagePreparer", "Prepared", "give_back"]

_log = structlog.get_logger("disco_gateway.a2a")

TARGET_KEY = "disco.target"
"""Where the endpoint puts the resolved agent (an ``A2ACardSource``) in the call context."""

_ID = TypeAdapter(Id)
_INTERRUPTED = {A2ATaskState.INPUT_REQUIRED.value, A2ATaskState.AUTH_REQUIRED.value}
_TERMINAL = {
    A2ATaskState.COMPLETED.value,
    A2ATaskState.FAILED.value,
    A2ATaskState.CANCELED.value,
    A2ATaskState.REJECTED.value,
}


class Duplicate(Exception):
    """The message was sent before: answer with what its first sending made.

    Attributes:
        task_id: the task the first sending made (or is making).
        turn: the turn it started (None: it answered a question, or only the task's
            history shows it).
        message_id: the message's id.
    """

    def __init__(
        self,
        task_id: str,
        turn: int | None,
        message_id: str,
        *,
        again: Prepared | None = None,
        resent: bool = False,
    ) -> None:
        super().__init__(f"message {message_id!r} was sent before (task {task_id})")
        self.task_id = task_id
        self.turn = turn
        self.message_id = message_id
        self.again = again
        """The message prepared once more on its recorded turn: what to send again if its
        first sending shows nothing (it may never have gone out)."""
        self.resent = resent
        """Its request went out once more already (the very same envelope)."""


ClaimState = Literal["held", "sending", "sent", "given back"]


@dataclass
class Claim:
    """What a message took before its request goes out (its turn, or the question it
    answers); given back when it never goes out, so that it may be sent again."""

    state: ClaimState = "held"
    recorded: bool = True
    """The turn is recorded; False: it is recorded as the request goes out (a first
    message's, on the fast path), which may find it taken."""


@dataclass(frozen=True)
class Prepared:
    """A message checked and claimed before the a2a-sdk takes it up.

    Attributes:
        message: the caller's message.
        agent: the agent it is for.
        capability: the skill it asks for (None: it answers a question to a human).
        payload: the request payload (checked against the skill's schema).
        turn: the turn the message is: a new one (recorded already), or the one whose
            question it answers.
        a2a: what the agent is told of the caller's message.
        claim: whether the message went out yet.
    """

    message: A2AMessage
    agent: str
    capability: DiscoveredCapability | None
    payload: Any
    turn: TurnRow
    a2a: A2AMessageContext
    claim: Claim = field(default_factory=Claim)

    @property
    def answers_question(self) -> bool:
        return self.capability is None


@dataclass(frozen=True)
class _Incoming:
    """A message as it came: the request, its message read as disco's model and as its
    A2A JSON, what the agent is to be told of it, and the call."""

    params: a2a_pb2.SendMessageRequest
    message: A2AMessage
    document: dict[str, Any]
    a2a: A2AMessageContext
    context: ServerCallContext


def _user_message_ids(row: TaskRow) -> set[str]:
    """The ids of the caller's messages a stored task's history holds."""
    return {
        str(message.get("messageId"))
        for message in row.task.get("history") or ()
        if isinstance(message, dict) and message.get("role") == "ROLE_USER"
    }


class MessagePreparer:
    """See the module docs."""

    def __init__(self, runtime: A2ARuntime) -> None:
        self._runtime = runtime

    async def prepare(
        self,
        params: a2a_pb2.SendMessageRequest,
        context: ServerCallContext,
        *,
        defer_claim: bool = False,
    ) -> Prepared:
        """The message of ``params``, checked and claimed (its ids filled in ``params``).

        ``defer_claim``: a first message's turn is recorded when its request goes out
        (see the module docs), not now.

        Raises:
            Duplicate: the message was sent before.
            A2AError: what the caller is told (invalid params, no such task, a task
                that takes no message now, the registry out of reach).
        """
        scope = CallScope.of(context)
        check_required_fields(params)  # what the a2a-sdk's handler checks first
        validate_history_length(params.configuration)
        try:
            document = MessageToDict(params.message)
            message = message_of(document)
        except ValueError as exc:
            raise InvalidParamsError(message=str(exc)) from None
        for name, value in (
            ("message.contextId", message.context_id),
            ("message.taskId", message.task_id),
        ):
            if value:
                try:
                    _ID.validate_python(value)
                except ValidationError:
                    raise InvalidParamsError(
                        message=f"{name} must be an id of letters, digits and ._:@- ",
                        data={"errors": [{"field": name, "message": "not a valid id"}]},
                    ) from None
        a2a = A2AMessageContext.of_message(
            message,
            accepted_output_modes=params.configuration.accepted_output_modes,
            requested_extensions=context.requested_extensions,
        )
        incoming = _Incoming(params, message, document, a2a, context)
        try:
            if message.task_id:
                prepared = await self._next_message(scope, incoming)
            else:
                prepared = await self._first_message(scope, incoming, defer_claim=defer_claim)
        except A2AMappingError as exc:
            raise InvalidParamsError(message=str(exc), data={"errors": exc.violations}) from None
        except ServiceError as exc:
            _log.warning("registry unavailable", error=repr(exc))
            raise InternalError(
                message="The agent registry cannot be reached; try again."
            ) from None
        return prepared

    async def target(
        self, scope: CallScope, context: ServerCallContext, name: str | None
    ) -> A2ACardSource:
        """Agent ``name`` as the caller's tenant sees it (the endpoint's when None).

        Raises:
            A2AMappingError: no agent named, or no such agent.
        """
        target = context.state.get(TARGET_KEY)
        if isinstance(target, A2ACardSource) and (name is None or target.name == name):
            return target
        if name is None:
            raise A2AMappingError(
                'name the agent: the gateway\'s endpoint takes "skill": "<agent>/<skill>" (or '
                '"agent": "<agent>") in the message\'s metadata; each agent also has its own '
                "endpoint at /a2a/<agent> (over gRPC: the request's tenant field)",
                field="metadata.skill",
            )
        found = await self._runtime.directory.agent(scope.tenant_id, name)
        if found is None:
            tenant = None if scope.anonymous else scope.tenant_id
            raise A2AMappingError(no_agent_message(name, tenant), field="metadata.skill")
        return found

    async def _first_message(
        self, scope: CallScope, incoming: _Incoming, *, defer_claim: bool
    ) -> Prepared:
        params, message = incoming.params, incoming.message
        skill = A2AGatewayHelper.requested_skill(message)
        name = scope.agent
        if name is None:
            named = (message.metadata or {}).get("agent")
            if isinstance(named, str):
                name = named
            elif skill is not None and "/" in skill:
                name = skill.split("/", 1)[0]
        target = await self.target(scope, incoming.context, name)
        capability = A2AGatewayHelper.choose_capability(target, skill)
        payload = A2AGatewayHelper.message_payload(message)
        A2AGatewayHelper.check_payload(capability, payload)
        if scope.anonymous:
            task_id = str(uuid.uuid4())
        else:
            task_id = message_task_id(
                scope.tenant_id, scope.user_id, target.name, message.message_id
            )
        if not params.message.context_id:
            params.message.context_id = str(uuid.uuid4())
        turn = self._turn(scope, incoming, task_id, 1, target.name, capability)
        if defer_claim:
            claim = Claim(recorded=False)
        elif await self._runtime.add_turn(scope.tenant_id, turn):
            claim = Claim()
        else:
            # Its earlier sending's turn: the request as that turn sends it (its context).
            recorded = await self._runtime.turn(scope.tenant_id, task_id, 1)
            again = None
            if recorded is not None:
                again = Prepared(message, target.name, capability, payload, recorded, incoming.a2a)
            raise Duplicate(task_id, 1, message.message_id, again=again)
        return Prepared(message, target.name, capability, payload, turn, incoming.a2a, claim)

    async def _next_message(self, scope: CallScope, incoming: _Incoming) -> Prepared:
        params, message, a2a = incoming.params, incoming.message, incoming.a2a
        runtime = self._runtime
        task_id = params.message.task_id
        row = await runtime.store.row(task_id, incoming.context)
        if row is None:
            raise TaskNotFoundError
        if not params.message.context_id:
            params.message.context_id = row.context_id  # the task's own context
        latest = await runtime.latest_turn(scope.tenant_id, task_id)
        if latest is None:
            raise TaskNotFoundError
        message_id = message.message_id
        sent_before = _sent_before(latest, message_id)
        if sent_before is not None:
            raise sent_before
        if message_id in _user_message_ids(row):
            raise Duplicate(task_id, None, message_id)  # an earlier turn's
        _check_takes_message(row)
        if latest.question is not None:
            if await runtime.claim_answer(scope.tenant_id, latest, message_id):
                return Prepared(message, latest.agent, None, None, latest, a2a)
            await self._raise_taken(scope, task_id, message_id)
        target = await self.target(scope, incoming.context, latest.agent)
        skill = A2AGatewayHelper.requested_skill(message) or latest.skill
        capability = A2AGatewayHelper.choose_capability(target, skill)
        payload = A2AGatewayHelper.message_payload(message)
        A2AGatewayHelper.check_payload(capability, payload)
        number = latest.turn + 1
        turn = self._turn(scope, incoming, task_id, number, latest.agent, capability)
        if not await runtime.add_turn(scope.tenant_id, turn):
            await self._raise_taken(scope, task_id, message_id)
        return Prepared(message, latest.agent, capability, payload, turn, a2a)

    async def _raise_taken(self, scope: CallScope, task_id: str, message_id: str) -> None:
        """Another message took the task's turn first: this one's earlier sending, or
        another message (the task is working on that one).

        Raises:
            Duplicate: it was this message.
            UnsupportedOperationError: it was another.
        """
        latest = await self._runtime.latest_turn(scope.tenant_id, task_id)
        sent_before = None if latest is None else _sent_before(latest, message_id)
        if sent_before is not None:
            raise sent_before
        raise UnsupportedOperationError(
            message=f"task {task_id} is working: send its next message when it asks for input "
            "(input-required)"
        )

    @staticmethod
    def _turn(
        scope: CallScope,
        incoming: _Incoming,
        task_id: str,
        number: int,
        agent: str,
        capability: DiscoveredCapability,
    ) -> TurnRow:
        """Turn ``number`` of the task, for the incoming message (its ids filled)."""
        context_id = incoming.params.message.context_id
        message = {**incoming.document, "taskId": task_id, "contextId": context_id}
        return TurnRow(
            task_id=task_id,
            turn=number,
            correlation_id=turn_correlation_id(task_id, number),
            context_id=context_id,
            user_id=scope.user_id,
            agent=agent,
            skill=capability.task_name,
            event_type=capability.consumed_event.event_type,
            message=message,
            question=None,
        )


def _sent_before(latest: TurnRow, message_id: str) -> Duplicate | None:
    """The message sent before, when it started the task's latest turn or answered its
    question (else None)."""
    if message_id == latest.message_id:
        return Duplicate(latest.task_id, latest.turn, message_id)
    if message_id == latest.answer_message_id:
        return Duplicate(latest.task_id, None, message_id)
    return None


async def give_back(runtime: A2ARuntime, tenant_id: str, prepared: Prepared) -> None:
    """Give the message's claim back unless its request went out (or is going out): the
    turn it recorded is forgotten, the question it took is asked again."""
    claim = prepared.claim
    if claim.state != "held" or not claim.recorded:
        return
    claim.state = "given back"
    try:
        if prepared.answers_question:
            await runtime.remember_question(tenant_id, prepared.turn, prepared.turn.question)
        else:
            await runtime.forget_turn(tenant_id, prepared.turn)
    except Exception as exc:
        # Sent again, the message then waits for a task that never comes (and says so).
        _log.warning("claim not given back", task_id=prepared.turn.task_id, error=repr(exc))


def _check_takes_message(row: TaskRow) -> None:
    """A task takes its next message only while it waits for input.

    Raises:
        UnsupportedOperationError: it is over, or working.
    """
    if row.status in _TERMINAL:
        raise UnsupportedOperationError(
            message=f"task {row.task_id} is over ({row.status}): start a new task"
        )
    if row.status not in _INTERRUPTED:
        raise UnsupportedOperationError(
            message=f"task {row.task_id} is working: send its next message when it asks "
            "for input (input-required)"
        )
