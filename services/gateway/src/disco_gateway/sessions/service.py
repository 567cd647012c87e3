"""What a UI may do in a session, the same over the websocket and over HTTP.

- :meth:`SessionService.replay`: the events after one the client saw;
- :meth:`SessionService.decide`: approve or deny a tool call waiting for it
  (``TOOL_APPROVED``/``TOOL_DENIED`` on ``notification-events``, the runtime's
  contract); the first decision wins, a decided or timed-out call is refused;
- :meth:`SessionService.answer`: answer a question to a human (typed as the
  question's ``response_event``, correlated as it asks; the Worker's contract);
- :meth:`SessionService.send_message`: a new turn, an ``action-requests``
  envelope to an agent in the session (checked like the publish bridge checks).

Tenant and user always come from the caller's token. Who may decide a tool call
or answer a question: an operator (``operator``, ``admin`` or ``service`` role)
any of the tenant's; a user those of the sessions started by or for them (the
event asking names the user); a session a service started for no user, an
operator only (403). Whoever decides, the agent resumes the session's state
(found by session and agent within the tenant). Decisions are recorded and their
envelopes published after the transaction commits (the outbox).

The instance's sockets see an event before it is stored (the hub stores behind
them), so replays, decisions and answers first wait for the hub to store what
it handed out (``settled``): whatever a client of this instance saw is found.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

import jsonschema
from pydantic import JsonValue

from disco.bus import BusClient
from disco_common.auth import Role
from disco_common.envelope import Notification
from disco_common.ids import utcnow
from disco_common.notifications import AgentUIEventType, HumanInputResponse
from disco_common.sessions import (
    SESSION_RESPONSE_EVENT,
    Accepted,
    SessionEvent,
    SessionEventPage,
    SessionEventType,
    StreamErrorCode,
)
from disco_common.topics import Topic
from disco_gateway.agents.service import AgentDirectory
from disco_gateway.errors import AgentNotFound
from disco_gateway.publish.schemas import PublishRequest
from disco_gateway.publish.service import Publisher
from disco_gateway.ratelimits import CallLimits
from disco_gateway.scope import CallScope
from disco_gateway.sessions.repository import AboutRow, SessionEventRepository
from disco_service import (
    Conflict,
    Database,
    Forbidden,
    Identity,
    NotFound,
    UnprocessableEntity,
    publish_after_commit,
)

__all__ = [
    "AlreadyDecided",
    "InvalidAnswer",
    "NotYoursToDecide",
    "SessionService",
    "TimedOut",
    "sees_every_user",
]

_REQUESTED = AgentUIEventType.TOOL_APPROVAL_REQUESTED.value
_DECIDED = (AgentUIEventType.TOOL_APPROVED.value, AgentUIEventType.TOOL_DENIED.value)
_ASKED = SessionEventType.HUMAN_INPUT_REQUESTED.value
_ANSWERED = SessionEventType.HUMAN_INPUT_ANSWERED.value
_OPERATOR_ROLES = frozenset({Role.OPERATOR, Role.ADMIN, Role.SERVICE})


class AlreadyDecided(Conflict):
    """409: the tool call was decided, or the question answered, already."""

    code = StreamErrorCode.ALREADY_DECIDED.value


class AlreadyAnswered(Conflict):
    code = StreamErrorCode.ALREADY_ANSWERED.value


class TimedOut(Conflict):
    """409: the wait timed out; nothing can decide it any more."""

    code = StreamErrorCode.TIMED_OUT.value


class InvalidAnswer(UnprocessableEntity):
    code = StreamErrorCode.INVALID_ANSWER.value


class NothingWaits(NotFound):
    code = StreamErrorCode.NOT_FOUND.value


def sees_every_user(identity: Identity) -> bool:
    """Whether ``identity`` sees the events of every user of its tenant (an operator)."""
    return not identity.roles.isdisjoint(_OPERATOR_ROLES)


def _visible(identity: Identity, row: AboutRow) -> bool:
    return row.user_id is None or row.user_id == identity.user_id or sees_every_user(identity)


class NotYoursToDecide(Forbidden):
    """403: a call or question of a session no user started: an operator's to decide."""

    code = StreamErrorCode.FORBIDDEN.value


def _check_may_decide(identity: Identity, row: AboutRow, what: str) -> None:
    """Raise unless ``identity`` may decide what ``row`` asks (it sees it: :func:`_visible`)."""
    if row.user_id is None and not sees_every_user(identity):
        raise NotYoursToDecide(
            f"{what} waits in a session a service started for no user: an operator (or a "
            "service) of the tenant decides it",
            details=[{"field": "session_id", "message": "started for no user"}],
        )


def _deadline(payload: dict[str, Any]) -> datetime | None:
    value = payload.get("deadline")
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


class SessionService:
    """The session side of a gateway instance (one per instance; see the module docs)."""

    def __init__(
        self,
        database: Database,
        bus: BusClient,
        directory: AgentDirectory,
        publisher: Publisher,
        limits: CallLimits,
        settled: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self._database = database
        self._bus = bus
        self._directory = directory
        self._publisher = publisher
        self._limits = limits
        self._settled = settled

    async def _settle(self) -> None:
        """Wait until the events this instance's sockets saw are stored (bounded)."""
        if self._settled is not None:
            await self._settled()

    async def replay(
        self,
        identity: Identity,
        session_id: str,
        *,
        after: str | None,
        limit: int,
        agents: Sequence[str] = (),
    ) -> SessionEventPage:
        """The session's events after event ``after`` (from the oldest kept with None).

        ``gap`` says ``after`` is no longer kept: events may be missing before the first.
        """
        tenant = identity.tenant_id
        await self._settle()
        async with self._database.unit_of_work(tenant, identity.user_id) as session:
            repository = SessionEventRepository(session, tenant)
            position, gap = 0, False
            if after is not None:
                found = await repository.seq_of(session_id, after)
                position, gap = (found, False) if found is not None else (0, True)
            items: list[SessionEvent] = []
            while len(items) < limit:
                rows = await repository.after(
                    session_id,
                    position,
                    limit=limit,
                    user_id=identity.user_id,
                    all_users=sees_every_user(identity),
                )
                if not rows:
                    break
                position = rows[-1][0]
                for _, document in rows:
                    event = SessionEvent.model_validate(document)
                    if not agents or _of_agents(event, agents):
                        items.append(event)
                if len(rows) < limit:
                    break
        items = items[:limit]
        return SessionEventPage(
            items=items, gap=gap, last_id=items[-1].id if items else after if not gap else None
        )

    async def decide(
        self,
        identity: Identity,
        session_id: str,
        tool_call_id: str,
        *,
        approve: bool,
        reason: str | None,
    ) -> Accepted:
        """Approve or deny tool call ``tool_call_id`` waiting in the session.

        Raises:
            NothingWaits: no such call asked for approval in the session (for this caller).
            NotYoursToDecide: a plain user, and the session was started for no user.
            AlreadyDecided: it was approved or denied already (the first decision stands).
            TimedOut: it waited too long and was denied with reason ``timeout``.
        """
        tenant = identity.tenant_id
        await self._settle()
        async with self._database.unit_of_work(tenant, identity.user_id) as session:
            repository = SessionEventRepository(session, tenant)
            rows = await repository.about(session_id, tool_call_id, (_REQUESTED, *_DECIDED))
            request = next(
                (r for r in rows if r.type == _REQUESTED and _visible(identity, r)), None
            )
            if request is None:
                raise NothingWaits(
                    f"no tool call {tool_call_id!r} waits for approval in session {session_id!r}",
                    details=[{"field": "tool_call_id", "message": "unknown"}],
                )
            _check_may_decide(identity, request, f"tool call {tool_call_id!r}")
            for row in rows:
                if row.type in _DECIDED:
                    _refuse_decided(tool_call_id, row)
            payload = request.event.get("payload") or {}
            deadline = _deadline(payload)
            if deadline is not None and utcnow() >= deadline:
                raise TimedOut(
                    f"tool call {tool_call_id!r} timed out at {deadline.isoformat()}: it is denied",
                    details=[{"field": "tool_call_id", "deadline": deadline.isoformat()}],
                )
            kind = _DECIDED[0] if approve else _DECIDED[1]
            event = {
                "type": kind,
                "session_id": session_id,
                "execution_id": request.event.get("execution_id") or session_id,
                "agent_id": request.event.get("agent_id"),
                "agent_name": request.event.get("agent_name"),
                "timestamp": utcnow().isoformat(),
                "payload": {
                    "tool_call_id": tool_call_id,
                    "tool_name": payload.get("tool_name"),
                    "decided_by": identity.user_id,
                    "reason": reason,
                },
            }
            envelope = Notification(
                id=str(uuid.uuid4()),
                source=self._bus.source,
                type=kind,
                data=event,
                session_id=session_id,
                correlation_id=session_id,
                tenant_id=tenant,
                user_id=identity.user_id,
            )
            recorded = await repository.decide(
                session_id,
                "approval",
                tool_call_id,
                decision="approve" if approve else "deny",
                decided_by=identity.user_id,
                event_id=envelope.id,
            )
            if recorded is None:
                first = await repository.decision(session_id, "approval", tool_call_id)
                raise AlreadyDecided(
                    f"tool call {tool_call_id!r} was decided already; the first decision stands",
                    details=[{"decision": first.decision if first else None}],
                )
            await publish_after_commit(session, Topic.NOTIFICATION_EVENTS, envelope)
        return Accepted(event_id=envelope.id, type=kind, correlation_id=session_id)

    async def answer(
        self, identity: Identity, session_id: str, question_id: str, answer: JsonValue
    ) -> Accepted:
        """Answer question ``question_id`` asked in the session.

        Raises:
            NothingWaits: no such question in the session (for this caller).
            NotYoursToDecide: a plain user, and the session was started for no user.
            AlreadyAnswered: it has its answer already.
            TimedOut: it timed out.
            InvalidAnswer: the answer is not one of its options, or breaks its schema.
            UnprocessableEntity: it is a tool approval (decide it with an approval).
        """
        tenant = identity.tenant_id
        await self._settle()
        async with self._database.unit_of_work(tenant, identity.user_id) as session:
            repository = SessionEventRepository(session, tenant)
            rows = await repository.about(session_id, question_id, (_ASKED, _ANSWERED))
            asked = next((r for r in rows if r.type == _ASKED and _visible(identity, r)), None)
            if asked is None:
                raise NothingWaits(
                    f"no question {question_id!r} was asked in session {session_id!r}",
                    details=[{"field": "question_id", "message": "unknown"}],
                )
            _check_may_decide(identity, asked, f"question {question_id!r}")
            question = asked.event.get("payload") or {}
            if question.get("kind") == "tool_approval":
                context = question.get("context") or {}
                raise UnprocessableEntity(
                    "this question is a tool approval: approve or deny tool call "
                    f"{context.get('tool_call_id')!r} instead (APPROVE_TOOL / DENY_TOOL, or POST "
                    "…/approvals/{tool_call_id})",
                    details=[{"field": "question_id", "message": "a tool approval"}],
                )
            for row in rows:
                if row.type == _ANSWERED:
                    if (row.event.get("payload") or {}).get("timed_out"):
                        raise TimedOut(f"question {question_id!r} timed out; nobody can answer it")
                    raise AlreadyAnswered(f"question {question_id!r} was answered already")
            deadline = _deadline(question)
            if deadline is not None and utcnow() >= deadline:
                raise TimedOut(
                    f"question {question_id!r} timed out at {deadline.isoformat()}",
                    details=[{"field": "question_id", "deadline": deadline.isoformat()}],
                )
            _check_answer(question, answer)
            response_event = question.get("response_event")
            correlation_id = question.get("correlation_id")
            if not isinstance(response_event, str) or not isinstance(correlation_id, str):
                raise UnprocessableEntity(f"question {question_id!r} cannot be answered")
            task_id, plan_id = question.get("task_id"), question.get("plan_id")
            response = HumanInputResponse(
                answer=answer,
                request_id=question_id,
                task_id=task_id,
                plan_id=plan_id,
                answered_by=identity.user_id,
            )
            envelope = Notification(
                id=str(uuid.uuid4()),
                source=self._bus.source,
                type=response_event,
                data=response.model_dump(mode="json", exclude_none=True),
                correlation_id=correlation_id,
                causation_id=question_id,
                session_id=session_id,
                task_id=task_id,
                plan_id=plan_id,
                tenant_id=tenant,
                user_id=identity.user_id,
            )
            recorded = await repository.decide(
                session_id,
                "answer",
                question_id,
                decision="answer",
                decided_by=identity.user_id,
                event_id=envelope.id,
            )
            if recorded is None:
                raise AlreadyAnswered(f"question {question_id!r} was answered already")
            await publish_after_commit(session, Topic.NOTIFICATION_EVENTS, envelope)
        return Accepted(event_id=envelope.id, type=response_event, correlation_id=correlation_id)

    async def send_message(
        self,
        identity: Identity,
        session_id: str,
        *,
        agent: str,
        text: str | None,
        data: dict[str, JsonValue] | None,
        skill: str | None,
    ) -> Accepted:
        """Start a turn: an ``action-requests`` envelope to ``agent`` in the session.

        Raises:
            RateLimited: the tenant's limit of calls is spent.
            AgentNotFound: no agent of that name for the caller's tenant.
            UnprocessableEntity: the agent takes no requests, or several and no ``skill``.
            InvalidPayload: the payload breaks the schema registered for the request.
        """
        await self._limits.count(CallScope(identity), None)
        source = await self._directory.agent(identity.tenant_id, agent)
        if source is None:
            raise AgentNotFound(
                f"no agent {agent!r}", details=[{"field": "agent", "message": "unknown"}]
            )
        skills = [
            capability
            for capability in source.capabilities
            if str(capability.consumed_event.topic) == Topic.ACTION_REQUESTS.value
        ]
        if skill is not None:
            skills = [capability for capability in skills if capability.task_name == skill]
        if len(skills) != 1:
            known: list[JsonValue] = [c.task_name for c in source.capabilities]
            raise UnprocessableEntity(
                f"agent {agent!r} takes {'no' if not skills else 'several'} requests"
                f"{'' if skill is None else f' named {skill!r}'}: name one as skill {known}",
                details=[{"field": "skill", "message": "choose one", "known": known}],
            )
        payload: dict[str, JsonValue] = {"text": text} if text is not None else dict(data or {})
        published = await self._publisher.publish(
            identity,
            PublishRequest(
                topic=Topic.ACTION_REQUESTS,
                event_type=skills[0].consumed_event.event_type,
                data=payload,
                session_id=session_id,
                response_event=SESSION_RESPONSE_EVENT,
            ),
            wait=None,
        )
        return Accepted(
            event_id=published.id,
            type=published.event_type,
            correlation_id=published.correlation_id,
        )


def _refuse_decided(tool_call_id: str, row: AboutRow) -> None:
    payload = row.event.get("payload") or {}
    if row.type == _DECIDED[1] and payload.get("reason") == "timeout":
        raise TimedOut(f"tool call {tool_call_id!r} timed out: it was denied")
    raise AlreadyDecided(
        f"tool call {tool_call_id!r} was {'approved' if row.type == _DECIDED[0] else 'denied'} "
        "already; the first decision stands",
        details=[{"decision": row.type, "decided_by": payload.get("decided_by")}],
    )


def _check_answer(question: dict[str, Any], answer: JsonValue) -> None:
    options = question.get("options")
    if isinstance(options, list) and options:
        values = [option.get("value") for option in options if isinstance(option, dict)]
        if answer not in values:
            raise InvalidAnswer(
                "the answer must be one of the question's options",
                details=[{"field": "answer", "options": values}],
            )
    schema = question.get("answer_schema")
    if isinstance(schema, dict) and schema:
        errors = sorted(
            jsonschema.Draft202012Validator(schema).iter_errors(answer), key=lambda e: e.path
        )
        if errors:
            raise InvalidAnswer(
                "the answer breaks the question's answer_schema",
                details=[
                    {"field": "answer" + "".join(f".{p}" for p in e.path), "message": e.message}
                    for e in errors[:20]
                ],
            )


def _of_agents(event: SessionEvent, agents: Sequence[str]) -> bool:
    """Whether ``event`` is of one of ``agents`` (events of no agent always are)."""
    if event.agent_id is None and event.agent_name is None:
        return True
    return event.agent_id in agents or event.agent_name in agents
