"""Hosting the loop on a disco agent: a :class:`~disco.Worker` task handler, or a one-shot Tool.

On a Worker (:meth:`AgentRunner.attach_worker`), each request ``{"text": ...}``
is a user turn of the session the envelope names (``session_id``; the task id
when it has none). The session is resumed from its snapshot in the memory
service (found by session and agent within the tenant, whoever's request,
decision or answer resumes it), the loop runs, and the final answer is the
task's result ``{"text": ...}``; progress goes to ``system-events`` as
``task.progress`` and UI events to ``notification-events``. The state keeps the
user the session was started by or for: a request of another user is refused
(``session_of_another_user``); one with no user (a service) may go on with any.

A tool call that needs approval waits without holding anything: the state is
saved, the task asks a person through the Worker's human-input wait (so the
tracker times it out, even across restarts, and its inbox lists it) and
``TOOL_APPROVAL_REQUESTED`` is published. A ``TOOL_APPROVED``/``TOOL_DENIED``
envelope for the session and call (same tenant) is relayed as the answer to
that wait; the first answer wins (the Worker's sub-task bookkeeping), a timeout
denies the call with reason ``timeout``. Everything a decision needs is in the
memory service and on the bus, so a decision sent while the agent is down is
honoured when it is back.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any, Protocol

import structlog
from pydantic import BaseModel, Field

from disco.agents import (
    AgentDefinitionError,
    InvocationContext,
    PlatformContext,
    ResultContext,
    TaskConflictError,
    TaskContext,
    Tool,
    Worker,
)
from disco.clients import MemoryClient, ServiceUnavailableError
from disco.runtime._approvals import ApprovalChannel, NoPendingApprovalError
from disco.runtime._events import (
    ApprovalRequested,
    EventSink,
    FanOutSink,
    RuntimeEvent,
    StepCompleted,
    ToolStarted,
)
from disco.runtime._messages import CompletionOptions
from disco.runtime._snapshots import MemorySnapshotStore, SnapshotError, SnapshotStore
from disco.runtime._state import AgentState, AgentStatus
from disco.runtime._tools import Toolbox
from disco.runtime._ui import BusEventSink, UIEventAdapter
from disco_common.envelope import Envelope
from disco_common.notifications import (
    AgentUIEventType,
    HumanInputOption,
    HumanInputResponse,
)
from disco_common.tasks import HITL_TIMEOUT_MAX_SECONDS, ErrorInfo
from disco_common.topics import Topic

__all__ = ["HostedRunner", "TextAnswer", "TextRequest", "host_on_tool", "host_on_worker"]

_log = structlog.get_logger("disco.runtime")

REQUEST_KEY = "disco.request_id"
"""State metadata: the task whose request started the current execution."""
SESSION_USER_KEY = "disco.session_user"
"""State metadata: the user the session was started by or for (None: a service started it)."""
TASK_STATE_KEY = "disco.runtime"
"""Task state: the session and the tool call a task's approval question is about."""
_NAMESPACE = uuid.UUID("0f6b8a34-55d1-4c4b-9a57-2b8e1c7d4e10")
_INDEX_GRACE_SECONDS = 86_400
_APPROVE_WORDS = {"approve", "approved", "yes", "y", "ok", "true", "allow", "go"}


class HostedRunner(Protocol):
    """What hosting uses of an agent runner (:class:`~disco.runtime.AgentRunner`
    satisfies it): its names, its tools, its snapshots (hosting on a Worker fills
    them in from the agent's memory when none are set), and the loop's entry points."""

    snapshots: SnapshotStore | None

    @property
    def name(self) -> str:
        """The runner's name."""
        ...

    @property
    def agent_id(self) -> str:
        """The agent id its states are saved under."""
        ...

    @property
    def description(self) -> str:
        """What the agent does (a tool's description)."""
        ...

    @property
    def include_continuation_trace(self) -> bool:
        """Whether UI events carry the criteria's evaluations."""
        ...

    @property
    def toolbox(self) -> Toolbox:
        """The runner's tools."""
        ...

    def new_state(
        self,
        session_id: str | None = None,
        *,
        parent_agent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        options: CompletionOptions | None = None,
    ) -> AgentState:
        """A fresh state of this agent in ``session_id``."""
        ...

    async def resume(self, session_id: str, agent_id: str | None = None) -> AgentState | None:
        """The latest saved state of this agent in ``session_id``, or None."""
        ...

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
        """Record the decision on the call ``state`` waits for."""
        ...

    async def run(
        self,
        state: AgentState,
        *,
        events: EventSink | None = None,
        approvals: ApprovalChannel | None = None,
    ) -> AgentState:
        """Run the execution ``state`` holds until it stops or waits for approval."""
        ...

    async def reopen_approval(
        self,
        state: AgentState,
        *,
        events: EventSink | None = None,
        approvals: ApprovalChannel | None = None,
    ) -> AgentState:
        """Announce again the approval ``state`` waits for."""
        ...


class TextRequest(BaseModel):
    """What a hosted agent is asked: one user message."""

    text: str = Field(min_length=1, max_length=200_000, description="The user's message.")


class TextAnswer(BaseModel):
    """What a hosted agent answers: its final message."""

    text: str = Field(description="The agent's final answer.")


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


def index_scope(agent_id: str, session_id: str) -> str:
    """The working-memory scope of a session's pending approvals (tenant-wide)."""
    return f"disco-runtime.{_digest(agent_id, session_id)}"


def index_key(tool_call_id: str) -> str:
    return f"call.{_digest(tool_call_id)}"


class _ProgressSink:
    """``task.progress`` while the loop works: each tool call and each step's end."""

    def __init__(self, task: TaskContext[Any]) -> None:
        self.task = task

    async def emit(self, event: RuntimeEvent) -> None:
        if isinstance(event, ToolStarted):
            await self.task.progress(message=f"calling {event.call.name}")
        elif isinstance(event, StepCompleted):
            step = event.step
            done = ", ".join(call.name for call in step.tool_calls) or step.type.value
            await self.task.progress(message=f"step {step.number} done: {done}")
        elif isinstance(event, ApprovalRequested):
            return  # asking a human reports its own progress (awaiting_input)

    async def flush(self) -> None:
        return None


def _decision(result: ResultContext) -> tuple[bool, str | None, str | None, bool]:
    """``(approved, reason, decided_by, announce)`` from an answer to the approval question."""
    if result.timed_out:
        return False, "timeout", None, True
    answer = result.answer
    if isinstance(answer, dict):
        approved = answer.get("approved")
        reason = answer.get("reason")
        decided_by = answer.get("decided_by")
        # Relayed from a TOOL_APPROVED/TOOL_DENIED envelope: that one is on the bus already.
        relayed = answer.get("decision_id") is not None
        return (
            approved is True,
            str(reason) if reason is not None else None,
            str(decided_by) if decided_by is not None else None,
            not relayed,
        )
    if isinstance(answer, bool):
        return answer, None, None, True
    text = str(answer or "").strip().lower()
    return text in _APPROVE_WORDS, None if text in _APPROVE_WORDS else (text or None), None, True


class WorkerHost:
    """The handlers that run an :class:`AgentRunner` on a :class:`Worker`."""

    def __init__(self, runner: HostedRunner, worker: Worker, event_type: str) -> None:
        self.runner = runner
        self.worker = worker
        self.event_type = event_type
        self.approval_event = f"{worker.name}.tool_approval.answered"
        self.adapter = UIEventAdapter(
            agent_name=worker.name, include_continuation=runner.include_continuation_trace
        )

    # -- what each handler needs ----------------------------------------------------

    def prepare(self, context: PlatformContext) -> None:
        # Snapshots need the memory service; the in-memory stand-in of
        # disco.testing keeps none, and the loop then runs without them.
        if self.runner.snapshots is None and isinstance(context.memory, MemoryClient):
            self.runner.snapshots = MemorySnapshotStore(context.memory)

    def sink(self, context: PlatformContext, task: TaskContext[Any]) -> EventSink:
        ui = BusEventSink(context.bus, self.adapter, tenant_id=task.tenant_id, user_id=task.user_id)
        return FanOutSink([ui, _ProgressSink(task)])

    def session_of(self, task: TaskContext[Any]) -> str:
        return task.session_id or task.task_id

    async def load(self, session_id: str) -> AgentState | None:
        try:
            return await self.runner.resume(session_id)
        except SnapshotError as exc:
            raise ServiceUnavailableError(503, "unavailable", str(exc)) from exc

    async def finish(self, task: TaskContext[Any], state: AgentState) -> None:
        if state.status is AgentStatus.COMPLETED:
            await task.complete(TextAnswer(text=state.last_response or ""))
        elif state.status is AgentStatus.FAILED:
            await task.fail(ErrorInfo(type="agent_failed", message=(state.error or "")[:4000]))
        elif state.status is AgentStatus.PAUSED:
            await task.fail(ErrorInfo(type="agent_paused", message=state.error or "paused"))
        # awaiting approval: the task waits for the answer to its question

    async def drive(
        self, task: TaskContext[Any], state: AgentState, context: PlatformContext
    ) -> None:
        """Take ``state`` as far as it goes, then end or park the task."""
        sink = self.sink(context, task)
        approvals = _WorkerApprovals(self, task, context)
        try:
            if state.status is AgentStatus.AWAITING_APPROVAL:
                state = await self.runner.reopen_approval(state, events=sink, approvals=approvals)
            elif state.status is AgentStatus.IN_PROGRESS:
                state = await self.runner.run(state, events=sink, approvals=approvals)
        except SnapshotError as exc:
            # The bus hands the envelope over again: the step is done again from the last snapshot.
            raise ServiceUnavailableError(503, "unavailable", str(exc)) from exc
        await self.finish(task, state)

    # -- handlers -------------------------------------------------------------------

    async def on_request(self, task: TaskContext[TextRequest], context: PlatformContext) -> None:
        self.prepare(context)
        session_id = self.session_of(task)
        state = await self.load(session_id)
        owner = state.metadata.get(SESSION_USER_KEY) if state is not None else None
        if (
            state is not None
            and SESSION_USER_KEY in state.metadata
            and task.user_id is not None
            and task.user_id != owner
        ):
            # The state is found by session and agent whoever asks (a decision resumes it
            # whoever decided): a person's new turn goes only into a session of their own.
            await task.fail(
                ErrorInfo(
                    type="session_of_another_user",
                    message=(
                        f"session {session_id!r} was started "
                        f"{'by a service' if owner is None else 'by or for another user'}: "
                        "start a session of your own"
                    ),
                )
            )
            return
        if state is not None and state.metadata.get(REQUEST_KEY) == task.task_id:
            # This very request again: its first handling did not finish. Go on from
            # where its last snapshot stands (its answer, its wait, or its next step).
            _log.info("resuming a request's execution", session_id=session_id, task=task.task_id)
        elif state is not None and state.status is AgentStatus.AWAITING_APPROVAL:
            wait = state.approval
            assert wait is not None
            await task.fail(
                ErrorInfo(
                    type="awaiting_approval",
                    message=(
                        f"session {session_id!r} waits for a decision on {wait.tool_name} "
                        f"(tool call {wait.tool_call_id}); approve or deny it first"
                    ),
                )
            )
            return
        else:
            base = state if state is not None else self.runner.new_state(session_id)
            if SESSION_USER_KEY not in base.metadata:
                base = base.with_metadata(**{SESSION_USER_KEY: task.user_id})
            state = base.with_user_message(task.input.text).with_metadata(
                **{REQUEST_KEY: task.task_id}
            )
        await self.drive(task, state, context)

    async def on_answer(self, result: ResultContext, context: PlatformContext) -> None:
        self.prepare(context)
        task = await result.restore_task()
        about = task.state.get(TASK_STATE_KEY)
        if not isinstance(about, dict) or not isinstance(about.get("tool_call_id"), str):
            _log.warning("an approval answer for a task that asked nothing", task=task.task_id)
            return
        tool_call_id = str(about["tool_call_id"])
        session_id = str(about.get("session_id") or self.session_of(task))
        state = await self.load(session_id)
        if state is None:
            await task.fail(
                ErrorInfo(type="agent_state_lost", message=f"no state of session {session_id!r}")
            )
            return
        waits_here = state.approval is not None and state.approval.tool_call_id == tool_call_id
        if state.status is AgentStatus.AWAITING_APPROVAL and waits_here:
            approved, reason, decided_by, announce = _decision(result)
            try:
                state = await self.runner.decide(
                    state,
                    tool_call_id,
                    approved=approved,
                    reason=reason,
                    decided_by=decided_by,
                    events=self.sink(context, task),
                    announce=announce,
                )
            except NoPendingApprovalError:  # pragma: no cover - checked just above
                return
        await self.drive(task, state, context)

    async def on_decision(self, envelope: Envelope, context: PlatformContext) -> None:
        """Relay a ``TOOL_APPROVED``/``TOOL_DENIED`` to the question the call waits on."""
        if envelope.source == context.bus.source:
            return  # our own (a timeout's denial): already applied
        data = envelope.data if isinstance(envelope.data, dict) else {}
        payload = data.get("payload") if isinstance(data.get("payload"), dict) else data
        assert isinstance(payload, dict)
        tool_call_id = payload.get("tool_call_id")
        session_id = envelope.session_id or data.get("session_id")
        if not isinstance(tool_call_id, str) or not isinstance(session_id, str):
            _log.info(
                "a tool decision without tool_call_id or session: ignored",
                event_id=envelope.id,
                type=envelope.type,
            )
            return
        entry = await context.memory.get_working(
            index_scope(self.runner.agent_id, session_id), index_key(tool_call_id)
        )
        if entry is None or not isinstance(entry.value, dict):
            return  # not a call of ours waiting in this session (or of another tenant)
        waiting = entry.value
        if waiting.get("tool_call_id") != tool_call_id:
            return
        decided_by = payload.get("decided_by") or envelope.user_id
        answer = {
            "approved": envelope.type == AgentUIEventType.TOOL_APPROVED.value,
            "reason": payload.get("reason"),
            "decided_by": decided_by,
            "decision_id": envelope.id,
        }
        task_id = _text(waiting.get("task_id"))
        response = HumanInputResponse(answer=answer, task_id=task_id)
        await context.bus.publish(
            Topic.NOTIFICATION_EVENTS,
            str(waiting["response_event"]),
            response.model_dump(mode="json", exclude_none=True),
            correlation_id=str(waiting["correlation_id"]),
            user_id=_text(waiting.get("user_id")) or envelope.user_id,
            session_id=session_id,
            task_id=task_id,
            id=str(uuid.uuid5(_NAMESPACE, f"{envelope.id}/approval-answer")),
        )


class _WorkerApprovals:
    """Opens an approval wait: the Worker's question (timed out by the tracker) and the index."""

    def __init__(self, host: WorkerHost, task: TaskContext[Any], context: PlatformContext) -> None:
        self.host = host
        self.task = task
        self.context = context

    async def open(self, state: AgentState) -> None:
        wait = state.approval
        assert wait is not None
        task = self.task
        timeout = max(1, min(int(wait.timeout_seconds or 900), HITL_TIMEOUT_MAX_SECONDS))
        task.state[TASK_STATE_KEY] = {
            "session_id": state.session_id,
            "agent_id": state.agent_id,
            "tool_call_id": wait.tool_call_id,
        }
        try:
            correlation_id = await task.request_human_input(
                f"Approve {wait.tool_name}({_arguments_text(wait.arguments)})?",
                response_event=self.host.approval_event,
                timeout_seconds=timeout,
                options=[
                    HumanInputOption(value={"approved": True}, label="Approve"),
                    HumanInputOption(value={"approved": False}, label="Deny"),
                ],
                context={
                    "kind": "tool_approval",
                    "session_id": state.session_id,
                    "agent_id": state.agent_id,
                    "tool_call_id": wait.tool_call_id,
                    "tool_name": wait.tool_name,
                    "arguments": wait.arguments,
                },
            )
        except TaskConflictError:
            # The same request was handled before and asked already: that question stands.
            record = await self.context.context_memory.get_task_context(task.task_id)
            asked = record.context.human_input if record is not None else None
            if asked is None:
                raise
            correlation_id = asked.correlation_id
        await self.context.memory.put_working(
            index_scope(state.agent_id, state.session_id),
            index_key(wait.tool_call_id),
            {
                "tool_call_id": wait.tool_call_id,
                "correlation_id": correlation_id,
                "response_event": self.host.approval_event,
                "task_id": task.task_id,
                "user_id": task.user_id,
            },
            ttl_seconds=timeout + _INDEX_GRACE_SECONDS,
        )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, dict):
        text = ", ".join(f"{key}={value!r}" for key, value in arguments.items())
    else:
        text = "" if arguments is None else repr(arguments)
    return text if len(text) <= 300 else text[:297] + "..."


def host_on_worker(runner: HostedRunner, worker: Worker, event_type: str) -> WorkerHost:
    """Register the runner's handlers on ``worker`` (see :meth:`AgentRunner.attach_worker`)."""
    host = WorkerHost(runner, worker, event_type)

    async def answer(task: TaskContext[TextRequest], context: PlatformContext) -> None:
        await host.on_request(task, context)

    answer.__doc__ = runner.description or f"Talk to the {worker.name} agent."
    answer.__name__ = f"{worker.name.replace('-', '_').replace('.', '_')}_answer"
    worker.on_task(event_type, description=answer.__doc__)(answer)

    async def approval_answered(result: ResultContext, context: PlatformContext) -> None:
        await host.on_answer(result, context)

    worker.on_human_input(host.approval_event)(approval_answered)

    async def tool_decided(event: Envelope, context: PlatformContext) -> None:
        await host.on_decision(event, context)

    for kind in (AgentUIEventType.TOOL_APPROVED, AgentUIEventType.TOOL_DENIED):
        worker.on_event(topic=Topic.NOTIFICATION_EVENTS, event_type=kind.value)(tool_decided)
    return host


def host_on_tool(runner: HostedRunner, tool: Tool, event_type: str) -> None:
    """Register the runner as a one-shot handler on ``tool`` (see :meth:`AgentRunner.attach_tool`).

    Raises:
        AgentDefinitionError: a tool of the runner may need approval (a one-shot
            call cannot wait for a person: host it on a Worker).
    """
    asking = [agent_tool.name for agent_tool in runner.toolbox if agent_tool.may_need_approval]
    asking += [source.name for source in runner.toolbox.sources if source.may_need_approval]
    if asking:
        raise AgentDefinitionError(
            f"tools {asking} of runner {runner.name!r} may need approval: a one-shot Tool call "
            "cannot wait for a person; host the runner on a Worker (runner.attach_worker)"
        )
    adapter = UIEventAdapter(
        agent_name=tool.name, include_continuation=runner.include_continuation_trace
    )

    async def answer(
        request: InvocationContext[TextRequest], context: PlatformContext
    ) -> TextAnswer:
        session_id = request.session_id or request.request_id
        sink = BusEventSink(
            context.bus, adapter, tenant_id=request.tenant_id, user_id=request.user_id
        )
        state = runner.new_state(session_id).with_user_message(request.input.text)
        state = await runner.run(state, events=sink)
        if state.status is not AgentStatus.COMPLETED:
            raise RuntimeError(state.error or f"the agent stopped: {state.status.value}")
        return TextAnswer(text=state.last_response or "")

    answer.__doc__ = runner.description or f"Ask the {tool.name} agent (one shot)."
    tool.on_invoke(event_type, description=answer.__doc__)(answer)
