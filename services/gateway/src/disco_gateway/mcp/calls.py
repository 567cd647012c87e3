"""``tools/list`` and ``tools/call``: the handlers of the gateway's MCP server.

A call is an A2A task of the tool's agent, sent and followed with the A2A
side's machinery (the executor records the turn and publishes the request, the
fan-out brings back what concerns it, :func:`~disco_gateway.a2a.mapping.translate`
reads it): A2A, the tracker and the console follow it like any other, and the
A2A consumer group applies what nobody here follows any more. Only the mapping
to MCP (:mod:`disco_gateway.mcp.mapping`) is the door's own.

A call ends with the agent's answer, after ``DISCO_GATEWAY_MCP_CALL_TIMEOUT_SECONDS``
without one (the task is stored as working and goes on), or when the agent asks
a person:

- a 2026-07-28 client that can show forms gets an ``InputRequiredResult``; its
  retry (on any instance) carries the form's content, published as the answer,
  and the call follows the task on;
- a 2025 client that can show forms gets ``elicitation/create`` on the call's
  stream, its id the sealed question; its response (a POST to ``/mcp`` that any
  instance takes, :mod:`disco_gateway.mcp.transport`) is published as the answer
  while this instance follows the task on, waiting up to the question's timeout;
- any other client gets a result saying how to answer over HTTP or A2A.

A 2026-07-28 client cancels by closing the call's stream; a 2025 client sends
``notifications/cancelled``. Either way the agent is asked to stop
(``task.cancel_requested``).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio
import mcp_types as types
import structlog
from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.utils.errors import A2AError
from mcp.server.context import ServerRequestContext
from mcp.shared.dispatcher import DispatchContext
from mcp.shared.exceptions import MCPError
from opentelemetry import trace
from pydantic import ValidationError

from disco.a2a import A2AMappingError
from disco_common.a2a import A2AMessageContext
from disco_common.notifications import HumanInputRequest
from disco_common.tasks import HITL_TIMEOUT_MAX_SECONDS
from disco_common.topics import Topic
from disco_gateway.a2a.executor import BusAgentExecutor, finished_task, keys_of
from disco_gateway.a2a.mapping import Translation, translate, turn_correlation_id, working
from disco_gateway.a2a.prepare import Claim, Duplicate, Prepared
from disco_gateway.a2a.runtime import A2ARuntime
from disco_gateway.bus.fanout import Inbox
from disco_gateway.mcp.catalog import ToolCatalog
from disco_gateway.mcp.context import McpCaller, current_caller
from disco_gateway.mcp.events import Asked, AskSeal, announce_cancel, publish_answer
from disco_gateway.mcp.mapping import (
    Streamed,
    answer_result,
    elicitation_form,
    form_answer,
    invalid_arguments_result,
    progress_text,
    question_result,
    request_message,
    timeout_result,
)
from disco_gateway.mcp.metrics import McpMetrics
from disco_gateway.mcp.tools import ToolEntry
from disco_gateway.scope import CallScope
from disco_gateway.tasks.repository import TurnRow
from disco_service import InvalidCursor

__all__ = ["ELICIT_KEY", "ToolCalls", "call_task_id"]

_log = structlog.get_logger("disco_gateway.mcp")

ELICIT_KEY = "disco.answer"
"""The key of a question's form in a 2026-07-28 ``InputRequiredResult``."""
_NAMESPACE = uuid.UUID("6c1f2e2a-4b8e-4f0c-9a55-1d7f3e9b2c40")
_ANSWERS = (Topic.ACTION_RESULTS.value,)
_GRACE_SECONDS = 30.0
"""How much longer than a question's timeout a call waits for its answer."""


def call_task_id(tenant_id: str, session_id: str | None, request_id: object) -> str:
    """The task of a call: one derived from its session and JSON-RPC id when it has a
    session (its ``notifications/cancelled`` names the request, and may reach any
    instance), else a new one."""
    if session_id is None or request_id is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(_NAMESPACE, f"{tenant_id}\n{session_id}\n{request_id!r}"))


def _request_channel(ctx: ServerRequestContext[Any, Any]) -> DispatchContext[Any]:
    # The request's own channel (its stream), to send a request under an id of our choice
    # (CallOptions["request_id"]): the SDK's typed helpers mint their own, and hand
    # handlers no other way to reach the channel than the session's.
    return ctx.session._request_outbound


class ToolCalls:
    """The MCP server's ``tools/list`` and ``tools/call`` (see the module docs).

    Args:
        runtime: the A2A side (bus, fan-out, task store, turns).
        catalog: the tools each view sees.
        seal: seals questions into elicitation ids.
        metrics: the door's metrics.
        stopping: whether the instance is stopping (a call cut short by it is not cancelled).
    """

    def __init__(
        self,
        runtime: A2ARuntime,
        catalog: ToolCatalog,
        seal: AskSeal,
        metrics: McpMetrics,
        stopping: Callable[[], bool],
    ) -> None:
        self.runtime = runtime
        self.catalog = catalog
        self.seal = seal
        self.metrics = metrics
        self.stopping = stopping
        self.executor = BusAgentExecutor(runtime)

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        caller = current_caller()
        try:
            return await self.catalog.page(caller.view, params.cursor if params else None)
        except InvalidCursor as exc:
            raise MCPError(types.INVALID_PARAMS, exc.message) from None

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        caller = current_caller()
        if params.request_state is not None:
            return await self._resume(ctx, params, caller)
        entry = await self.catalog.find(caller.view, params.name)
        if entry is None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {params.name!r}: tools/list lists the tools you may call",
            )
        try:
            payload = entry.payload(params.arguments)
        except A2AMappingError as exc:
            self.metrics.call("invalid_arguments")
            return invalid_arguments_result(exc)
        session_id = caller.session.session_id if caller.session is not None else None
        task_id = call_task_id(caller.scope.tenant_id, session_id, ctx.request_id)
        context_id = session_id or task_id
        message = request_message(entry, payload, session_id=session_id, request_id=ctx.request_id)
        document = {
            **message.model_dump(mode="json", by_alias=True, exclude_none=True),
            "taskId": task_id,
            "contextId": context_id,
        }
        turn = TurnRow(
            task_id=task_id,
            turn=1,
            correlation_id=turn_correlation_id(task_id, 1),
            context_id=context_id,
            user_id=caller.scope.user_id,
            agent=entry.source.name,
            skill=entry.capability.task_name,
            event_type=entry.capability.consumed_event.event_type,
            message=document,
            question=None,
        )
        scope = replace(caller.scope, agent=entry.source.name)
        _trace(turn, session_id, ctx.request_id)
        prepared = Prepared(
            message,
            entry.source.name,
            entry.capability,
            payload,
            turn,
            # What the agent is told of the call (where it came from: the MCP call).
            A2AMessageContext(message_id=message.message_id, metadata=message.metadata or {}),
            # The turn is recorded while the request travels, as the A2A fast path does.
            Claim(recorded=False),
        )
        awaiting = None if _progress_token(params) is not None else _ANSWERS
        async with self.runtime.fanout.subscribe(keys_of(turn), awaiting=awaiting) as inbox:
            try:
                await self.executor.send(scope, turn, prepared)
            except Duplicate:
                pass  # the same call sent again (its session and id): its request went out
            except A2AError:
                raise MCPError(
                    types.INTERNAL_ERROR, "the bus is unavailable; call the tool again"
                ) from None
            return await _Follow(self, ctx, caller, scope, turn, entry).run(inbox, stored=False)

    async def _resume(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        caller: McpCaller,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The retry of a 2026-07-28 call whose agent asked a person: the answer, then on."""
        try:
            asked = Asked.load(params.request_state or "")
        except ValueError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        turn = asked.turn_row()
        if asked.tenant_id != caller.scope.tenant_id or turn.user_id != caller.scope.user_id:
            raise MCPError(types.INVALID_PARAMS, "the question was asked of someone else")
        response = (params.input_responses or {}).get(ELICIT_KEY)
        try:
            result = types.ElicitResult.model_validate(
                response.model_dump(by_alias=True) if response is not None else None
            )
        except ValidationError:
            result = types.ElicitResult(action="cancel")
        answer = form_answer(asked.form, result)
        scope = replace(caller.scope, agent=turn.agent)
        entry = await self.catalog.find(caller.view, params.name)
        async with self.runtime.fanout.subscribe(keys_of(turn)) as inbox:
            await publish_answer(self.runtime, scope, asked, answer)
            return await _Follow(self, ctx, caller, scope, turn, entry).run(inbox, stored=True)


def _progress_token(params: types.CallToolRequestParams) -> object:
    meta = params.meta
    return getattr(meta, "progress_token", None) if meta is not None else None


def _trace(turn: TurnRow, session_id: str | None, request_id: object) -> None:
    """Record which MCP request and session the task comes from (span and log)."""
    span = trace.get_current_span()
    span.set_attribute("disco.task_id", turn.task_id)
    span.set_attribute("disco.agent", turn.agent)
    if session_id is not None:
        span.set_attribute("mcp.session.id", session_id)
    if request_id is not None:
        span.set_attribute("jsonrpc.request.id", str(request_id))
    _log.info(
        "mcp tool called",
        task_id=turn.task_id,
        agent=turn.agent,
        skill=turn.skill,
        mcp_session_id=session_id,
        mcp_request_id=str(request_id) if request_id is not None else None,
    )


class _Follow:
    """One leg of a call: what comes back on the bus, until the call's result."""

    def __init__(
        self,
        calls: ToolCalls,
        ctx: ServerRequestContext[Any, Any],
        caller: McpCaller,
        scope: CallScope,
        turn: TurnRow,
        entry: ToolEntry | None,
    ) -> None:
        self._calls = calls
        self._runtime = calls.runtime
        self._ctx = ctx
        self._caller = caller
        self._scope = scope
        self._turn = turn
        self._entry = entry
        self._stored = False
        self._progress = 0
        self._streamed = Streamed()
        self._asking: set[asyncio.Task[Any]] = set()

    async def run(
        self, inbox: Inbox, *, stored: bool
    ) -> types.CallToolResult | types.InputRequiredResult:
        self._stored = stored
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._runtime.settings.mcp_call_timeout_seconds
        try:
            while True:
                delivery = None
                with anyio.move_on_after(max(0.0, deadline - loop.time())):
                    delivery = await inbox.get()
                if delivery is None:
                    return await self._timed_out()
                translation = translate(delivery, self._turn)
                if not translation.events:
                    continue
                envelope = delivery.envelope
                if translation.question is not None:
                    outcome = await self._asked(envelope, translation)
                    if isinstance(outcome, float):
                        deadline = max(deadline, loop.time() + outcome)
                        continue
                    return outcome
                if translation.ends_turn:
                    return await self._answered(envelope, translation)
                await self._progressed(envelope)
        except BaseException:
            if self._caller.era == "modern" and await self._abandoned():
                with anyio.CancelScope(shield=True):
                    await self._cancel("the MCP client cancelled the call")
            raise
        finally:
            for asking in self._asking:
                asking.cancel()

    async def _abandoned(self) -> bool:
        """Whether the client went away (a 2026-07-28 call is cancelled by closing its
        stream), rather than this instance stopping."""
        if self._calls.stopping():
            return False
        request = self._ctx.request
        if request is None:
            return False
        with anyio.CancelScope(shield=True):
            return bool(await request.is_disconnected())
        return False  # a shielded scope swallows no cancellation; for the type checker

    async def _cancel(self, reason: str) -> None:
        self._calls.metrics.call("cancelled")
        try:
            await announce_cancel(self._runtime.bus, self._scope, self._turn.task_id, reason)
        except Exception as exc:  # the call is gone either way
            _log.warning("cancel not announced", task_id=self._turn.task_id, error=repr(exc))

    async def _store(self, translation: Translation) -> None:
        """Store the task as ``translation`` leaves it (once: later changes are the A2A
        consumer group's to apply)."""
        if self._stored:
            return
        self._stored = True
        task = finished_task(self._turn, None, translation)
        with contextlib.suppress(ConcurrentTaskModificationError):
            await self._runtime.store.insert(
                task, self._scope.context(), history=[self._turn.message]
            )

    async def _answered(self, envelope: Any, translation: Translation) -> types.CallToolResult:
        result = answer_result(envelope, self._entry, self._turn.task_id, self._streamed)
        self._calls.metrics.call("failed" if result.is_error else "answered")
        if not translation.direct_message and not self._stored:
            await self._store(translation)
            self._runtime.settle(self._scope.tenant_id, self._turn.correlation_id)
        return result

    async def _timed_out(self) -> types.CallToolResult:
        self._calls.metrics.call("timed_out")
        await self._store(Translation(events=[working(self._turn)]))
        settings = self._runtime.settings
        return timeout_result(
            task_id=self._turn.task_id,
            agent=self._turn.agent,
            seconds=settings.mcp_call_timeout_seconds,
            public_url=settings.gateway_public_url,
        )

    async def _progressed(self, envelope: Any) -> None:
        self._streamed.add(envelope)
        text = progress_text(envelope)
        if text is None:
            return
        self._progress += 1
        await self._ctx.session.report_progress(float(self._progress), None, text)

    def _can_elicit(self) -> bool:
        wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        return self._ctx.session.check_client_capability(wanted)

    async def _asked(
        self, envelope: Any, translation: Translation
    ) -> types.CallToolResult | types.InputRequiredResult | float:
        """The agent asks a person: the call's result, or how long to wait for the answer
        to the form this instance sent."""
        question = translation.question
        assert question is not None
        tenant_id = self._scope.tenant_id
        await self._runtime.remember_question(tenant_id, self._turn, question)
        await self._store(translation)
        request = HumanInputRequest.model_validate(envelope.data)
        form = elicitation_form(request)
        seconds = float(request.timeout_seconds or HITL_TIMEOUT_MAX_SECONDS)
        asked = Asked.of(
            self._turn, question, form.state(), tenant_id=tenant_id, seconds=seconds + 60
        )
        settings = self._runtime.settings
        if not self._can_elicit() or (
            self._caller.era == "handshake" and not self._ctx.session.can_send_request
        ):
            self._calls.metrics.call("asked")
            return question_result(
                envelope,
                task_id=self._turn.task_id,
                agent=self._turn.agent,
                public_url=settings.gateway_public_url,
            )
        self._calls.metrics.call("elicited")
        if self._caller.era == "modern":
            return types.InputRequiredResult(
                input_requests={ELICIT_KEY: types.ElicitRequest(params=form.params)},
                request_state=asked.dump(),
            )
        params = form.params.model_dump(by_alias=True, mode="json", exclude_none=True)
        channel = _request_channel(self._ctx)
        asking = asyncio.ensure_future(
            channel.send_raw_request(
                "elicitation/create", params, {"request_id": self._calls.seal.seal(asked)}
            )
        )
        # Its answer comes to the door, on whichever instance: nothing waits for it here.
        asking.add_done_callback(_forget)
        self._asking.add(asking)
        return seconds + _GRACE_SECONDS


def _forget(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.info("an elicitation ended without an answer here", error=repr(task.exception()))
