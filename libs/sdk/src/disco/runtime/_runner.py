"""``AgentRunner``: the LLM agent loop.

One step is one inference and the tool calls it asked for. After every step
the continuation criteria decide whether to go on (every verdict recorded),
the step's events go to the sink and the state is snapshotted. A tool call
that needs approval ends the run with the state ``awaiting_approval`` (saved
durably first); :meth:`AgentRunner.decide` records the decision and
:meth:`AgentRunner.run` goes on from there — in this process or, after a
restart, in another one that resumed the state from its snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from disco.runtime._approvals import ApprovalChannel, NoPendingApprovalError
from disco.runtime._continuation import ContinuationCriteria, Criterion, StepsLimit, UserCriterion
from disco.runtime._drivers import ChatAccumulator, ChatDriver
from disco.runtime._emitter import Clock, Emitter
from disco.runtime._events import (
    ApprovalDecided,
    ApprovalRequested,
    ContinuationEvaluated,
    EventSink,
    NullSink,
    StatusChanged,
    StepCompleted,
    StepStarted,
    StreamChunk,
)
from disco.runtime._hosting import host_on_tool, host_on_worker
from disco.runtime._messages import CompletionOptions, Message, Usage
from disco.runtime._snapshots import SnapshotStore
from disco.runtime._state import (
    AgentState,
    AgentStatus,
    AgentStep,
    ApprovalDecision,
    InFlightStep,
    StepType,
)
from disco.runtime._tool_calls import ToolCallExecutor, unique_ids
from disco.runtime._tools import AgentTool, Toolbox, ToolSource
from disco_common.ids import new_id, utcnow

if TYPE_CHECKING:
    from disco.agents import Tool, Worker

__all__ = ["AgentRunner"]

_log = structlog.get_logger("disco.runtime")

DEFAULT_APPROVAL_TIMEOUT_SECONDS = 900


def _monotonic() -> float:
    # One place the loop reads its clock (running time, durations): tests replace it.
    return time.monotonic()


class AgentRunner:
    """Runs an LLM agent: a system prompt, tools, continuation criteria, a driver.

    Args:
        name: the agent's name (events' ``agent_name``; the default ``agent_id``).
        driver: the model (:class:`OpenAIChatDriver`, :class:`ScriptedDriver`...).
        system_prompt: what the model is told first, every step.
        tools: :class:`AgentTool` s, typed functions, or sources of tools such as an MCP
            server's (:class:`disco.runtime.mcp.MCPTools`), asked for their tools each
            time the runner runs.
        criteria: continuation criteria (``ToolCallPresence`` is always added);
            default ``StepsLimit(20)``.
        options: completion options of new sessions (a resumed session keeps its own).
        snapshots: where states are saved after every step (none by default;
            a hosted runner uses the memory service).
        approval_timeout_seconds: how long a call waits for approval before it
            is denied with reason ``timeout``.
        agent_id: the id states and snapshots carry (default: ``name``), the
            same across restarts so that a session can be resumed.
        include_continuation_trace: let the UI adapter publish continuation
            outcomes and every criterion's evaluation.
        description: what the agent does (registered when it is hosted).

    Raises:
        TypeError: a tool or criterion is not valid.
    """

    def __init__(
        self,
        name: str,
        *,
        driver: ChatDriver,
        system_prompt: str = "",
        tools: Iterable[AgentTool | ToolSource | Callable[..., Any]] = (),
        criteria: Sequence[Criterion | UserCriterion] | None = None,
        options: CompletionOptions | None = None,
        snapshots: SnapshotStore | None = None,
        approval_timeout_seconds: int = DEFAULT_APPROVAL_TIMEOUT_SECONDS,
        agent_id: str | None = None,
        include_continuation_trace: bool = False,
        description: str = "",
    ) -> None:
        if approval_timeout_seconds < 1:
            raise ValueError(
                f"approval_timeout_seconds must be >= 1, got {approval_timeout_seconds}"
            )
        self.name = name
        self.agent_id = agent_id or name
        self.driver = driver
        self.system_prompt = system_prompt
        self.toolbox = Toolbox(tools)
        self.criteria = ContinuationCriteria(criteria if criteria is not None else [StepsLimit(20)])
        self.options = options or CompletionOptions()
        self.snapshots = snapshots
        self.approval_timeout_seconds = approval_timeout_seconds
        self.include_continuation_trace = include_continuation_trace
        self.description = description
        self._tools_changed()

    def _tools_changed(self) -> None:
        self._specs = self.toolbox.specs()
        self._tool_names = tuple(self.toolbox.names)
        self._tool_calls = ToolCallExecutor(self.toolbox)

    async def aclose(self) -> None:
        """Let go of what the tool sources hold (an MCP server's connection)."""
        for source in self.toolbox.sources:
            await source.aclose()

    # -- hosting ----------------------------------------------------------------------

    def attach_worker(self, worker: Worker, event_type: str) -> None:
        """Answer ``event_type`` tasks of ``worker`` with this agent.

        The request ``{"text": ...}`` is a user turn of the envelope's session
        (resumed from its snapshot in the memory service); the task's result is
        ``{"text": <final answer>}``; progress goes out as ``task.progress`` and
        UI events on ``notification-events``. Tool approvals wait on the
        Worker's human-input wait and on ``TOOL_APPROVED``/``TOOL_DENIED``
        envelopes, which the worker then also consumes.

        Raises:
            AgentDefinitionError: ``event_type`` is handled already.
        """
        host_on_worker(self, worker, event_type)

    def attach_tool(self, tool: Tool, event_type: str) -> None:
        """Answer ``event_type`` requests of ``tool`` with this agent, one shot each.

        Every request is a new conversation (nothing is resumed); the answer is
        ``{"text": <final answer>}``, an execution that fails is an error answer.

        Raises:
            AgentDefinitionError: a tool may need approval (host on a Worker), or
                ``event_type`` is handled already.
        """
        host_on_tool(self, tool, event_type)

    # -- sessions ---------------------------------------------------------------------

    def new_state(
        self,
        session_id: str | None = None,
        *,
        parent_agent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        options: CompletionOptions | None = None,
    ) -> AgentState:
        """A fresh state of this agent in ``session_id`` (a new id if omitted)."""
        return AgentState(
            agent_id=self.agent_id,
            parent_agent_id=parent_agent_id,
            session_id=session_id or new_id(),
            system_prompt=self.system_prompt,
            options=options or self.options,
            metadata=metadata or {},
            status=AgentStatus.COMPLETED,
        )

    async def resume(self, session_id: str, agent_id: str | None = None) -> AgentState | None:
        """The latest saved state of this agent (or ``agent_id``) in ``session_id``, or None.

        Read from the latest full snapshot; the slim one when the full one
        cannot be read. Messages, options, metadata and cumulative time come back.

        Raises:
            RuntimeError: the runner has no snapshot store.
        """
        if self.snapshots is None:
            raise RuntimeError(
                f"runner {self.name!r} has no snapshot store: pass snapshots=MemorySnapshotStore("
                "memory) (a hosted runner gets one from its agent)"
            )
        return await self.snapshots.load(session_id, agent_id or self.agent_id)

    async def send(
        self,
        state: AgentState,
        text: str,
        *,
        events: EventSink | None = None,
        approvals: ApprovalChannel | None = None,
    ) -> AgentState:
        """Start a new execution with the user message ``text`` and run it."""
        return await self.run(state.with_user_message(text), events=events, approvals=approvals)

    async def decide(
        self,
        state: AgentState,
        tool_call_id: str,
        *,
        approved: bool,
        reason: str | None = None,
        decided_by: str | None = None,
        events: EventSink | None = None,
        announce: bool = True,
    ) -> AgentState:
        """Record the decision on the call ``state`` waits for; :meth:`run` then goes on.

        Args:
            announce: emit ``TOOL_APPROVED``/``TOOL_DENIED`` (off when the decision
                is already on the bus, published by whoever took it).

        Raises:
            NoPendingApprovalError: ``state`` does not wait for ``tool_call_id``.
        """
        wait = state.approval
        flight = state.in_flight
        if (
            state.status is not AgentStatus.AWAITING_APPROVAL
            or wait is None
            or flight is None
            or wait.tool_call_id != tool_call_id
        ):
            waiting = wait.tool_call_id if wait is not None else None
            raise NoPendingApprovalError(
                f"agent {state.agent_id!r} in session {state.session_id!r} does not wait for "
                f"approval of {tool_call_id!r} (it waits for {waiting!r})"
            )
        decision = ApprovalDecision(approved=approved, reason=reason, decided_by=decided_by)
        state = state.with_(
            status=AgentStatus.IN_PROGRESS,
            approval=None,
            in_flight=flight.model_copy(
                update={"decisions": {**flight.decisions, tool_call_id: decision}}
            ),
        )
        if announce:
            emitter = Emitter(events or NullSink(), state)
            await emitter.emit(
                ApprovalDecided(
                    **emitter.ids(),
                    tool_call_id=tool_call_id,
                    tool_name=wait.tool_name,
                    approved=approved,
                    reason=reason,
                    decided_by=decided_by,
                )
            )
            await emitter.flush()
        return state

    # -- the loop ---------------------------------------------------------------------

    async def run(
        self,
        state: AgentState,
        *,
        events: EventSink | None = None,
        approvals: ApprovalChannel | None = None,
    ) -> AgentState:
        """Run the execution ``state`` holds until it stops or waits for approval.

        Returns the state at the end: ``completed`` (the answer is the last
        message), ``failed`` (``error`` says why; the model's or driver's
        errors end here, not in an exception), ``awaiting_approval`` (call
        :meth:`decide`, then ``run`` again), or unchanged when there was
        nothing to run (finished, paused, or still waiting). The tool sources (MCP
        servers) are asked for their tools first; one that cannot list them fails
        the execution (``error`` says which), and the next run asks again.

        Raises:
            SnapshotError: the state could not be saved before waiting for approval.
            Exception: what the approval channel raised when it could not open
                (the waiting state is saved: run again or reopen it).
        """
        if state.status is not AgentStatus.IN_PROGRESS:
            return state
        emitter = Emitter(events or NullSink(), state)
        clock = Clock(_monotonic)
        if state.system_prompt != self.system_prompt:
            state = state.with_(system_prompt=self.system_prompt)
        if not state.steps and state.in_flight is None:
            await emitter.emit(StatusChanged(**emitter.ids(), status=AgentStatus.IN_PROGRESS))
        try:
            if self.toolbox.sources and await self.toolbox.load():
                self._tools_changed()
            while True:
                if state.in_flight is None:
                    state = await self._infer(state, emitter, clock)
                    if state.in_flight is not None:
                        # The calls the model chose, kept before any runs: a process that
                        # dies in one resumes these very calls (their ids name their
                        # journaled steps) instead of asking the model again.
                        await self._save(state)
                if state.in_flight is not None:
                    state = await self._tool_calls.run(
                        state, emitter, clock, self.approval_timeout_seconds
                    )
                    if state.status is AgentStatus.AWAITING_APPROVAL:
                        return await self._wait_for_approval(state, emitter, approvals)
                    state = self._close_step(state)
                outcome = self.criteria.evaluate(state)
                state = state.with_(last_continuation=outcome)
                await emitter.emit(
                    StepCompleted(**emitter.ids(), step=state.steps[-1], continuation=outcome)
                )
                await emitter.emit(ContinuationEvaluated(**emitter.ids(), outcome=outcome))
                if not outcome.should_continue:
                    state = self._stop(state)
                    await self._announce_status(state, emitter)
                    await emitter.flush()
                    await self._save(state)
                    return state
                await emitter.flush()
                await self._save(state)
        except Exception as exc:
            if isinstance(exc, _Durability):
                raise exc.error from None
            return await self._fail(state, exc, emitter, clock)

    async def _infer(self, state: AgentState, emitter: Emitter, clock: Clock) -> AgentState:
        number = len(state.steps) + 1
        messages = state.messages_for_inference()
        await emitter.emit(
            StepStarted(
                **emitter.ids(),
                step_number=number,
                message_count=len(messages),
                available_tools=self._tool_names,
            )
        )
        started_at = utcnow()
        clock.lap()
        accumulator = ChatAccumulator()
        streamed = False
        async for chunk in self.driver.stream(messages, tools=self._specs, options=state.options):
            accumulator.add(chunk)
            if chunk.text:
                streamed = True
                await emitter.emit(
                    StreamChunk(
                        **emitter.ids(), chunk=chunk.text, tokens_delta=max(1, len(chunk.text) // 4)
                    )
                )
        if streamed:
            await emitter.emit(StreamChunk(**emitter.ids(), chunk="", is_complete=True))
        response = accumulator.result()
        seconds = clock.lap()
        state = state.with_(usage=state.usage + response.usage).with_time(seconds)
        content = response.content.replace("\x00", "\ufffd")
        if response.tool_calls:
            calls = unique_ids(response.tool_calls)
            flight = InFlightStep(
                number=number,
                started_at=started_at,
                finish_reason=response.finish_reason,
                content=content,
                tool_calls=calls,
                remaining=tuple(call.id for call in calls),
                usage=response.usage,
                seconds=seconds,
            )
            assistant = Message.assistant(content, calls)
            return state.with_(
                execution_buffer=(*state.execution_buffer, assistant), in_flight=flight
            )
        step = AgentStep(
            number=number,
            type=StepType.FINAL,
            finish_reason=response.finish_reason,
            content=content,
            usage=response.usage,
            started_at=started_at,
            ended_at=utcnow(),
            duration_ms=seconds * 1000.0,
        )
        messages_after = state.messages
        if content:
            # Only the final answer joins the conversation (seed 001).
            messages_after = (*messages_after, Message.assistant(content))
        return state.with_(messages=messages_after, steps=(*state.steps, step))

    def _close_step(self, state: AgentState) -> AgentState:
        flight = state.in_flight
        assert flight is not None
        step = AgentStep(
            number=flight.number,
            type=StepType.TOOL_EXECUTION,
            finish_reason=flight.finish_reason,
            content=flight.content,
            tool_calls=flight.tool_calls,
            errors=flight.errors,
            usage=flight.usage,
            started_at=flight.started_at,
            ended_at=utcnow(),
            duration_ms=flight.seconds * 1000.0,
        )
        return state.with_(steps=(*state.steps, step), in_flight=None)

    def _stop(self, state: AgentState) -> AgentState:
        outcome = state.last_continuation
        last = state.steps[-1] if state.steps else None
        if last is not None and last.type is StepType.FINAL:
            return state.with_(status=AgentStatus.COMPLETED, error=None, execution_buffer=())
        reason = "stopped"
        if outcome is not None:
            verdict = next(
                (e.reason for e in outcome.evaluations if e.criterion == outcome.resolved_by), ""
            )
            reason = f"stopped before a final answer: {outcome.stop_reason} ({verdict})"
        return state.with_failure(reason)

    async def _wait_for_approval(
        self, state: AgentState, emitter: Emitter, approvals: ApprovalChannel | None
    ) -> AgentState:
        wait = state.approval
        assert wait is not None
        await self._save(state, durable=True)
        if approvals is not None:
            try:
                await approvals.open(state)
            except Exception as exc:  # the host's to retry: the wait is saved
                raise _Durability(exc) from exc
        flight = state.in_flight
        call = next(c for c in flight.tool_calls if c.id == wait.tool_call_id) if flight else None
        if call is not None:
            await emitter.emit(
                ApprovalRequested(
                    **emitter.ids(),
                    call=call,
                    arguments=wait.arguments,
                    reason=f"{call.name} needs a person's approval",
                    timeout_seconds=wait.timeout_seconds,
                    deadline=wait.deadline,
                )
            )
        await self._announce_status(state, emitter)
        await emitter.flush()
        return state

    async def reopen_approval(
        self,
        state: AgentState,
        *,
        events: EventSink | None = None,
        approvals: ApprovalChannel | None = None,
    ) -> AgentState:
        """Announce again the approval ``state`` waits for (after a crash left it half-announced).

        Returns ``state`` unchanged when it does not wait.
        """
        if state.status is not AgentStatus.AWAITING_APPROVAL or state.approval is None:
            return state
        try:
            return await self._wait_for_approval(
                state, Emitter(events or NullSink(), state), approvals
            )
        except _Durability as exc:
            raise exc.error from None

    async def _announce_status(self, state: AgentState, emitter: Emitter) -> None:
        await emitter.emit(
            StatusChanged(
                **emitter.ids(),
                status=state.status,
                step_count=state.step_count,
                error=state.error,
                last_response=state.last_response
                if state.status is AgentStatus.COMPLETED
                else None,
            )
        )

    async def _fail(
        self, state: AgentState, exc: Exception, emitter: Emitter, clock: Clock
    ) -> AgentState:
        message = f"{type(exc).__name__}: {exc}"
        _log.warning(
            "the agent's execution failed",
            agent_id=state.agent_id,
            session_id=state.session_id,
            error=message,
        )
        seconds = clock.lap()
        flight = state.in_flight
        number = flight.number if flight is not None else len(state.steps) + 1
        step = AgentStep(
            number=number,
            type=StepType.ERROR,
            finish_reason="error",
            tool_calls=flight.tool_calls if flight is not None else (),
            errors=(*(flight.errors if flight is not None else ()), message),
            usage=flight.usage if flight is not None else Usage(),
            started_at=flight.started_at if flight is not None else utcnow(),
            ended_at=utcnow(),
            duration_ms=((flight.seconds if flight is not None else 0.0) + seconds) * 1000.0,
        )
        state = state.with_time(seconds).with_(steps=(*state.steps, step)).with_failure(message)
        await emitter.emit(StepCompleted(**emitter.ids(), step=step))
        await self._announce_status(state, emitter)
        await emitter.flush()
        try:
            await self._save(state)
        except Exception as save_error:  # already failing: say so, keep the first error
            _log.warning("the failed state could not be saved", error=repr(save_error))
        return state

    async def _save(self, state: AgentState, *, durable: bool = False) -> None:
        if self.snapshots is None:
            return
        if not durable:
            await self.snapshots.save(state)
            return
        try:
            await self.snapshots.save(state, durable=True)
        except Exception as exc:
            raise _Durability(exc) from exc


class _Durability(Exception):
    """A durable save failed: not the execution's failure, the caller's to handle."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error
