"""Running the tool calls of a step, one after the other.

Every call's result goes back to the model as a tool message. A call that
fails (an unknown tool, invalid arguments, an exception) becomes the error text
the model reads, not the execution's failure. A call whose tool asks for
approval stops the step there: its wait goes into the state, and the step goes
on from that call once the decision is recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import structlog

from disco._steps import step_scope
from disco.runtime._approvals import approval_wait, denied_text
from disco.runtime._emitter import Clock, Emitter
from disco.runtime._events import ToolFinished, ToolLogged, ToolStarted
from disco.runtime._messages import Message, ToolCall
from disco.runtime._state import AgentState, AgentStatus, InFlightStep
from disco.runtime._tools import (
    AgentTool,
    ToolArgumentsError,
    Toolbox,
    _current_call,
    _LogSink,
    result_text,
)

__all__ = ["ToolCallExecutor", "unique_ids"]

_log = structlog.get_logger("disco.runtime")


class ToolCallExecutor:
    """Runs the tool calls of a step with an agent's tools."""

    __slots__ = ("_tool_names", "toolbox")

    def __init__(self, toolbox: Toolbox) -> None:
        self.toolbox = toolbox
        self._tool_names = tuple(toolbox.names)

    async def run(
        self, state: AgentState, emitter: Emitter, clock: Clock, approval_timeout_seconds: int
    ) -> AgentState:
        """Run the calls ``state.in_flight`` has left, until they are done or one waits.

        Returns the state with every result in the execution buffer, or
        ``awaiting_approval`` with the wait (of ``approval_timeout_seconds``) of
        the call that needs a decision first.
        """
        flight = state.in_flight
        assert flight is not None
        calls = {call.id: call for call in flight.tool_calls}
        while flight.remaining:
            call = calls[flight.remaining[0]]
            clock.lap()
            outcome = await self._call(flight, call, emitter, clock)
            if outcome is None:
                # Waits for approval: ``_call`` said so in the state it returns below.
                wait = approval_wait(
                    call, state, self.toolbox.get(call.name), approval_timeout_seconds
                )
                return state.with_(status=AgentStatus.AWAITING_APPROVAL, approval=wait)
            content, error = outcome
            seconds = clock.lap()
            flight = flight.model_copy(
                update={
                    "remaining": flight.remaining[1:],
                    "errors": (*flight.errors, error) if error else flight.errors,
                    "seconds": flight.seconds + seconds,
                }
            )
            message = Message.tool(call.id, call.name, content)
            state = state.with_(
                execution_buffer=(*state.execution_buffer, message), in_flight=flight
            ).with_time(seconds)
        return state

    async def _call(
        self, flight: InFlightStep, call: ToolCall, emitter: Emitter, clock: Clock
    ) -> tuple[str, str | None] | None:
        """Run one call: ``(text for the model, error or None)``, or None to wait for approval."""
        tool = self.toolbox.get(call.name)
        if tool is None:
            known = ", ".join(self._tool_names) or "none"
            error = f"unknown tool {call.name!r}; the tools are: {known}"
            await emitter.emit(
                ToolFinished(**emitter.ids(), call=call, success=False, error=error, executed=False)
            )
            return f"error: {error}", error
        try:
            raw = call.parsed_arguments()
            arguments = tool.validate(raw)
        except (ValueError, ToolArgumentsError) as exc:
            error = str(exc)
            await emitter.emit(
                ToolFinished(**emitter.ids(), call=call, success=False, error=error, executed=False)
            )
            return f"error: {error}. Call the tool again with valid arguments.", error
        try:
            needs_approval = tool.needs_approval(arguments)
        except Exception as exc:  # a broken policy asks rather than acts
            _log.warning("a tool's approval policy failed; asking", tool=tool.name, error=repr(exc))
            needs_approval = True
        if needs_approval:
            decision = flight.decisions.get(call.id)
            if decision is None:
                return None
            if not decision.approved:
                text = denied_text(decision)
                await emitter.emit(
                    ToolFinished(
                        **emitter.ids(),
                        call=call,
                        success=False,
                        error=f"denied: {decision.reason or 'no reason given'}",
                        executed=False,
                    )
                )
                return text, None
        shown = tool.shown_arguments(arguments.model_dump())
        await emitter.emit(ToolStarted(**emitter.ids(), call=call, arguments=shown))
        started = clock.now()
        result, failure = await self._invoke(tool, call, arguments, emitter)
        duration_ms = (clock.now() - started) * 1000.0
        if failure is not None:
            await emitter.emit(
                ToolFinished(
                    **emitter.ids(),
                    call=call,
                    success=False,
                    error=failure,
                    duration_ms=duration_ms,
                )
            )
            message = f"{type(failure).__name__}: {failure}"
            return f"error: {message}", message
        await emitter.emit(
            ToolFinished(
                **emitter.ids(), call=call, success=True, result=result, duration_ms=duration_ms
            )
        )
        return result_text(result), None

    async def _invoke(
        self, tool: AgentTool, call: ToolCall, arguments: Any, emitter: Emitter
    ) -> tuple[Any, Exception | None]:
        loop = asyncio.get_running_loop()
        logs: asyncio.Queue[ToolLogged | None] = asyncio.Queue()

        def write(tool_call_id: str, tool_name: str, level: str, message: str) -> None:
            event = ToolLogged(
                **emitter.ids(),
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                level=level,
                message=message,
            )
            loop.call_soon_threadsafe(logs.put_nowait, event)

        async def relay() -> None:
            while (event := await logs.get()) is not None:
                await emitter.emit(event)

        relaying = asyncio.create_task(relay())
        token = _current_call.set(_LogSink(call.id, call.name, write))
        try:
            # Steps a tool takes (disco.step) are this call's: two calls of one tool in
            # one handling are two steps.
            with step_scope(call.id):
                return await tool.invoke(arguments), None
        except Exception as exc:
            return None, exc
        finally:
            _current_call.reset(token)
            # Logs written from a thread arrive through call_soon_threadsafe: let them land.
            await asyncio.sleep(0)
            logs.put_nowait(None)
            await relaying


def unique_ids(calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """``calls`` with a repeated id made unique: results and decisions are keyed by call id."""
    seen: set[str] = set()
    unique: list[ToolCall] = []
    for index, call in enumerate(calls):
        if call.id in seen:
            call = call.model_copy(update={"id": f"{call.id}-{index}"})
        seen.add(call.id)
        unique.append(call)
    return tuple(unique)
