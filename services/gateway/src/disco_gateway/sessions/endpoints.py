"""Live UI streams: ``/v1/sessions/{session_id}/stream`` (websocket) and its HTTP equivalents.

Websocket authentication (browsers cannot set headers on a websocket): the
bearer token in ``Authorization: Bearer <jwt>``, or as a subprotocol — offer
``["disco.v1", "bearer.<jwt>"]``; the server selects ``disco.v1`` — or in the
``access_token`` query parameter. A missing, bad or expired token closes the
socket with code **4401** (reason says why); a token expiring while connected
closes it with 4401 too. 1013 means the instance is starting or stopping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request, WebSocket
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect, WebSocketState

from disco.bus import sign_as
from disco.runtime import to_json_safe
from disco_common.ids import utcnow
from disco_common.sessions import (
    CLIENT_MESSAGE,
    Accepted,
    Answer,
    AnswerRequest,
    ApprovalDecision,
    ApprovalRequest,
    ApproveTool,
    DenyTool,
    MessageRequest,
    Ping,
    SendMessage,
    SessionEvent,
    SessionEventPage,
    SessionEventType,
    StreamErrorCode,
)
from disco_gateway.sessions.hub import Gap, Subscriber
from disco_gateway.sessions.service import SessionService, sees_every_user
from disco_gateway.state import GatewayState
from disco_service import DiscoHTTPError, Identity, IdentityDep, error_responses

__all__ = ["CLOSE_UNAUTHENTICATED", "SUBPROTOCOL", "router"]

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], responses=error_responses(401, 403))

SUBPROTOCOL = "disco.v1"
"""The subprotocol the gateway selects when a browser offers its token as ``bearer.<jwt>``."""
CLOSE_UNAUTHENTICATED = 4401
CLOSE_TRY_AGAIN = 1013
_TOKEN_PROTOCOL = "bearer."  # noqa: S105 - a prefix, not a secret
_MAX_CLIENT_MESSAGE = 256 * 1024
_REPLAY_PAGE = 500

SessionIdPath = Annotated[str, Path(min_length=1, max_length=200, description="The session id.")]
AgentQuery = Annotated[
    list[str] | None,
    Query(description="Only events of these agents (by name or id); events of no agent pass."),
]


def _service(state: GatewayState) -> SessionService:
    return state.require_sessions()


@router.get(
    "/{session_id}/events",
    response_model=SessionEventPage,
    summary="Replay a session's events (catch up after a disconnect)",
)
async def list_events(
    request: Request,
    session_id: SessionIdPath,
    identity: IdentityDep,
    after: Annotated[
        str | None,
        Query(max_length=200, description="The last event id seen (none: from the oldest kept)."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    agent: AgentQuery = None,
) -> SessionEventPage:
    """The session's events after ``after``, oldest first, as the stream sent them (the
    caller's tenant; another user's events only for an operator). ``gap`` is true when
    ``after`` is no longer kept (retention): start over from the items given."""
    return await _service(GatewayState.of(request)).replay(
        identity, session_id, after=after, limit=limit, agents=agent or ()
    )


@router.post(
    "/{session_id}/approvals/{tool_call_id}",
    response_model=Accepted,
    status_code=202,
    responses=error_responses(403, 404, 409),
    summary="Approve or deny a tool call waiting for a person",
)
async def decide(
    request: Request,
    session_id: SessionIdPath,
    tool_call_id: Annotated[str, Path(min_length=1, max_length=200)],
    body: ApprovalRequest,
    identity: IdentityDep,
) -> Accepted:
    """Publishes ``TOOL_APPROVED`` or ``TOOL_DENIED`` for the call (``payload.tool_call_id``);
    the agent runs or skips it. An operator (or admin, or service) decides any call of the
    tenant; a user the calls of sessions started by or for them. 404: no such call waits in
    the session (for this caller); 403 ``forbidden``: the session was started by a service,
    for no user (an operator decides it); 409 ``already_decided`` (the first decision
    stands) or ``timed_out``."""
    return await _service(GatewayState.of(request)).decide(
        identity,
        session_id,
        tool_call_id,
        approve=body.decision is ApprovalDecision.APPROVE,
        reason=body.reason,
    )


@router.post(
    "/{session_id}/answers/{question_id}",
    response_model=Accepted,
    status_code=202,
    responses=error_responses(403, 404, 409),
    summary="Answer a question an agent asked a person (HUMAN_INPUT_REQUESTED)",
)
async def answer(
    request: Request,
    session_id: SessionIdPath,
    question_id: Annotated[str, Path(min_length=1, max_length=200)],
    body: AnswerRequest,
    identity: IdentityDep,
) -> Accepted:
    """Publishes the answer as the question asks (its ``response_event``, its correlation id).
    Who may answer is who may decide a tool call (403 ``forbidden``: a question of a session
    no user started, for an operator). 422 ``invalid_answer``: not one of its options, or
    against its ``answer_schema``; 409 ``already_answered`` or ``timed_out``."""
    return await _service(GatewayState.of(request)).answer(
        identity, session_id, question_id, body.answer
    )


@router.post(
    "/{session_id}/messages",
    response_model=Accepted,
    status_code=202,
    responses=error_responses(404),
    summary="Start a new turn: a request to an agent in this session",
)
async def send_message(
    request: Request, session_id: SessionIdPath, body: MessageRequest, identity: IdentityDep
) -> Accepted:
    """An ``action-requests`` envelope to ``agent`` (its capability; ``skill`` names one when it
    has several) with ``{"text": ...}`` or ``data``, in this session; checked against the
    schema registered for it (422 listing violations)."""
    return await _service(GatewayState.of(request)).send_message(
        identity,
        session_id,
        agent=body.agent,
        text=body.text,
        data=body.data,
        skill=body.skill,
    )


# -- the websocket --------------------------------------------------------------------


def _token_of(websocket: WebSocket, access_token: str | None) -> tuple[str | None, str | None]:
    """The bearer token, and the subprotocol to select (see the module docs)."""
    offered: list[str] = list(websocket.scope.get("subprotocols") or [])
    selected = SUBPROTOCOL if SUBPROTOCOL in offered else None
    header = websocket.headers.get("authorization")
    if header is not None and header.lower().startswith("bearer "):
        return header[7:].strip(), selected
    for protocol in offered:
        if protocol.startswith(_TOKEN_PROTOCOL):
            return protocol[len(_TOKEN_PROTOCOL) :], selected
    return access_token, selected


class _Socket:
    """One connected client: sends are serialized; control messages share the event shape."""

    def __init__(self, websocket: WebSocket, session_id: str, *, max_payload_bytes: int) -> None:
        self.websocket = websocket
        self.session_id = session_id
        self._max_bytes = max_payload_bytes
        self._lock = asyncio.Lock()

    async def send(self, text: str) -> None:
        async with self._lock:
            await self.websocket.send_text(text)

    async def control(self, kind: SessionEventType, payload: dict[str, Any]) -> None:
        message = SessionEvent(
            id=None,
            type=kind.value,
            session_id=self.session_id,
            timestamp=utcnow(),
            payload=to_json_safe(payload, max_bytes=self._max_bytes),
        )
        await self.send(message.model_dump_json())


@router.websocket("/{session_id}/stream")
async def stream(
    websocket: WebSocket,
    session_id: str,
    after: str | None = None,
    agent: Annotated[list[str] | None, Query()] = None,
    access_token: str | None = None,
) -> None:
    """The session's events live (see the module docs and the README's "Live UI streams")."""
    state = GatewayState.of(websocket)
    token, subprotocol = _token_of(websocket, access_token)
    await websocket.accept(subprotocol=subprotocol)
    if not 1 <= len(session_id) <= 200:
        await websocket.close(1008, "the session id must be 1-200 characters")
        return
    if token is None:
        await websocket.close(CLOSE_UNAUTHENTICATED, "a bearer token is required")
        return
    try:
        claims = await state.verifier.verify(token)
        identity = Identity.from_claims(claims, websocket.headers)
    except DiscoHTTPError as exc:
        await websocket.close(CLOSE_UNAUTHENTICATED, exc.message[:120])
        return
    # As for every route: what this socket publishes is vouched for by the caller's
    # token (the socket closes when it expires).
    sign_as(token)
    if state.sessions is None or state.hub is None:
        await websocket.close(CLOSE_TRY_AGAIN, "the gateway is starting or stopping")
        return
    service, hub, settings = state.sessions, state.hub, state.settings
    socket = _Socket(websocket, session_id, max_payload_bytes=settings.stream_payload_max_bytes)
    async with hub.subscribe(
        identity.tenant_id,
        session_id,
        user_id=identity.user_id,
        all_users=sees_every_user(identity),
        agents=agent or (),
        queue_size=settings.stream_queue_size,
    ) as subscriber:
        tasks = [
            asyncio.create_task(_pump(socket, service, identity, subscriber, after, agent or ())),
            asyncio.create_task(_receive(socket, service, identity)),
        ]
        if claims.exp is not None:
            tasks.append(asyncio.create_task(_expire(socket, claims.exp)))
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
    if websocket.client_state is WebSocketState.CONNECTED:
        with contextlib.suppress(Exception):
            await websocket.close(1000)


async def _pump(
    socket: _Socket,
    service: SessionService,
    identity: Identity,
    subscriber: Subscriber,
    after: str | None,
    agents: list[str] | tuple[str, ...],
) -> None:
    """Replay what followed ``after``, then the live events, without gap or duplicate."""
    replayed: set[str] = set()
    last = after
    if after is not None:
        while True:
            page = await service.replay(
                identity, socket.session_id, after=last, limit=_REPLAY_PAGE, agents=agents
            )
            if page.gap:
                await socket.control(
                    SessionEventType.STREAM_GAP,
                    {"after": after, "dropped": None, "reason": "the event is no longer kept"},
                )
            for event in page.items:
                await socket.send(event.model_dump_json())
                assert event.id is not None
                replayed.add(event.id)
            last = page.last_id
            if len(page.items) < _REPLAY_PAGE:
                break
    while True:
        item = await subscriber.next()
        if isinstance(item, Gap):
            replay = f"/v1/sessions/{socket.session_id}/events"
            await socket.control(
                SessionEventType.STREAM_GAP,
                {
                    "after": last,
                    "dropped": item.dropped,
                    "reason": "the socket fell behind",
                    "replay": replay if last is None else f"{replay}?after={quote(last)}",
                },
            )
            continue
        if item.id in replayed:
            replayed.discard(item.id)
            continue
        await socket.send(item.text)
        last = item.id


async def _receive(socket: _Socket, service: SessionService, identity: Identity) -> None:
    """Handle client messages until the client goes."""
    websocket = socket.websocket
    while True:
        try:
            raw = await websocket.receive_text()
        except (WebSocketDisconnect, RuntimeError):
            return
        await _handle(socket, service, identity, raw)


async def _handle(socket: _Socket, service: SessionService, identity: Identity, raw: str) -> None:
    request_id: Any = None
    try:
        if len(raw) > _MAX_CLIENT_MESSAGE:
            raise _Refused("a client message is at most 256 KiB", field=None)
        try:
            document = json.loads(raw)
        except ValueError:
            raise _Refused("a client message is one JSON object", field=None) from None
        if isinstance(document, dict):
            request_id = document.get("request_id")
        try:
            message = CLIENT_MESSAGE.validate_python(document)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or None
            raise _Refused(f"{field or 'message'}: {first['msg']}", field=field) from None
        accepted = await _dispatch(socket.session_id, service, identity, message)
    except _Refused as exc:
        await socket.control(
            SessionEventType.ERROR,
            {
                "code": StreamErrorCode.INVALID_MESSAGE.value,
                "message": exc.message,
                "field": exc.field,
                "request_id": request_id,
            },
        )
        return
    except DiscoHTTPError as exc:
        await socket.control(
            SessionEventType.ERROR,
            {
                "code": exc.code,
                "message": exc.message,
                "details": exc.details,
                "status": exc.status_code,
                "request_id": request_id,
            },
        )
        return
    if accepted is None:
        await socket.control(SessionEventType.PONG, {"request_id": request_id})
        return
    await socket.control(
        SessionEventType.ACK,
        {"request_id": request_id, **accepted.model_dump(mode="json")},
    )


async def _dispatch(
    session_id: str,
    service: SessionService,
    identity: Identity,
    message: ApproveTool | DenyTool | Answer | SendMessage | Ping,
) -> Accepted | None:
    if isinstance(message, ApproveTool | DenyTool):
        return await service.decide(
            identity,
            session_id,
            message.tool_call_id,
            approve=isinstance(message, ApproveTool),
            reason=message.reason,
        )
    if isinstance(message, Answer):
        return await service.answer(identity, session_id, message.question_id, message.answer)
    if isinstance(message, SendMessage):
        return await service.send_message(
            identity,
            session_id,
            agent=message.agent,
            text=message.text,
            data=message.data,
            skill=message.skill,
        )
    return None


class _Refused(Exception):
    def __init__(self, message: str, *, field: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


async def _expire(socket: _Socket, exp: int) -> None:
    """Close the socket when its token expires."""
    await asyncio.sleep(max(0.0, exp - time.time()))
    await socket.websocket.close(CLOSE_UNAUTHENTICATED, "the token expired")
