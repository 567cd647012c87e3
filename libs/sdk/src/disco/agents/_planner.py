"""Layer 4: :class:`Planner`, goals run as event-driven state machines.

A plan is a :class:`~disco_common.plans.PlanContextData` in the memory service:
its states (:class:`~disco_common.plans.StateConfig`), where it is, what it
gathered. Entering a state publishes its action (a request on
``action-requests``, or a question to a human on ``notification-events``); the
answer moves the plan along the first transition whose ``on_event`` matches and
whose CEL ``condition`` holds (:mod:`disco.conditions`); terminal states
answer the goal. Lifecycle goes to ``system-events`` (``plan.*``).

Routing is cheap: the correlation id of every action a plan publishes names the
planner and the plan (``plan.<planner>.<plan_id>.<step>``), so an answer is
matched to its plan by parsing that id; envelopes of other agents are dropped
without touching memory, and a duplicate or late answer (its correlation id no
longer outstanding) is ignored.

A plan is saved before its action (or the goal's answer) is published, with
the action as published (:class:`~disco_common.plans.PendingAction`) or the
outcome, and the id of the envelope whose handling saved it. If the process
dies in between, that envelope is redelivered and finds the plan already moved:
the Planner then publishes the saved action or answer again, with its first
ids (:meth:`Planner._recover`). A stale answer also re-sends an action that has
waited longer than a grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import structlog
from pydantic import JsonValue, ValidationError

from disco.agents._agent import Agent, PlatformContext
from disco.agents._common import (
    KEPT_PAYLOAD_MAX_BYTES,
    ResendMemo,
    answer,
    capability_for,
    current_cause,
    derived_id,
    json_size,
    publish_again,
    publish_system_event,
)
from disco.agents._errors import AgentError, PlanError, TaskConflictError
from disco.agents._faults import CrashPoint, crash_point
from disco.agents._handlers import describe, error_info, inspect_handler, to_json
from disco.bus import ANY_EVENT, BusError
from disco.clients import ServiceConflictError, ServiceUnavailableError
from disco.conditions import (
    ConditionError,
    TemplateError,
    check_condition,
    evaluate_condition,
    render_template,
)
from disco_common.envelope import ActionRequest, Envelope
from disco_common.notifications import HumanInputRequest, HumanInputResponse, NotificationType
from disco_common.plans import (
    MAX_PLAN_STATES,
    PendingAction,
    PlanContextData,
    PlanDefinition,
    PlanHistoryEntry,
    PlanStatus,
    StateConfig,
    check_state_machine,
)
from disco_common.system_events import (
    PlanCompletedData,
    PlanFailedData,
    PlanPausedData,
    PlanResumedData,
    PlanStartedData,
    PlanStateChangedData,
    SystemEventType,
)
from disco_common.tasks import ActionResultData, ErrorInfo
from disco_common.topics import Topic

if TYPE_CHECKING:
    from disco.llm import LLMDriver

__all__ = ["GoalContext", "PlanContext", "Planner", "TransitionContext"]

_log = structlog.get_logger("disco.agents")

InputT = TypeVar("InputT")
HandlerT = TypeVar("HandlerT", bound=Callable[..., Awaitable[Any]])

_TRANSIENT = (ServiceUnavailableError, BusError)
_CONFLICT_RETRIES = 20
_HELD = "_disco_held_answer"
_RESEND_GRACE = timedelta(seconds=10)
"""How old a plan's pending action must be before a stale answer re-sends it."""
_FINISHER_GRACE = timedelta(seconds=10)
"""How long a final plan's answer may stay unconfirmed before a stale answer publishes it again."""


def _now() -> datetime:
    return datetime.now(UTC)


States = PlanDefinition | Mapping[str, StateConfig] | Sequence[StateConfig]


def _definition(states: States, initial_state: str | None, plan_type: str | None) -> PlanDefinition:
    if isinstance(states, PlanDefinition):
        definition = states
        if initial_state is not None and initial_state != definition.initial_state:
            definition = definition.model_copy(update={"initial_state": initial_state})
        try:
            check_state_machine(definition.initial_state, definition.states)
        except ValueError as exc:
            raise PlanError(f"the plan's state machine is not valid: {exc}") from None
    else:
        listed = list(states.values()) if isinstance(states, Mapping) else list(states)
        try:
            definition = PlanDefinition(
                plan_type=plan_type or "plan",
                initial_state=initial_state or "start",
                states=listed,  # type: ignore[arg-type]
            )
        except ValidationError as exc:
            raise PlanError(f"the plan's state machine is not valid: {exc}") from None
    for config in definition.states.values():
        for transition in config.transitions:
            if transition.condition is not None:
                try:
                    check_condition(transition.condition)
                except ConditionError as exc:
                    raise PlanError(
                        f"state {config.state_name!r}, transition on {transition.on_event!r}: {exc}"
                    ) from None
    return definition


def _is_human_action(config: StateConfig) -> bool:
    return config.action is not None and (
        config.action.topic == Topic.NOTIFICATION_EVENTS.value
        or config.action.event_type == NotificationType.HUMAN_INPUT.value
    )


class TransitionContext:
    """An event that may move a plan: the answer to one of its actions (or a human's answer).

    ``success``/``result``/``error`` read an :class:`ActionResultData` answer; a
    human's answer reads as ``result`` = the answer (``success`` false when it
    timed out). ``next_state`` is where the state machine would go.
    """

    def __init__(self, envelope: Envelope, plan: PlanContext, topic: str) -> None:
        self.envelope = envelope
        self.plan = plan
        self.topic = topic
        self.success = True
        self.result: JsonValue = envelope.data
        self.error: ErrorInfo | None = None
        self.human_input: HumanInputResponse | None = None
        data = envelope.data
        if topic == Topic.NOTIFICATION_EVENTS.value:
            try:
                self.human_input = HumanInputResponse.model_validate(data)
            except ValidationError:
                self.human_input = HumanInputResponse(answer=data)
            self.result = self.human_input.answer
            if self.human_input.timed_out:
                self.success = False
                self.error = ErrorInfo(type="hitl_timeout", message="nobody answered in time")
        elif isinstance(data, dict) and isinstance(data.get("success"), bool):
            try:
                parsed = ActionResultData.model_validate(data)
            except ValidationError:
                pass
            else:
                self.success, self.result, self.error = parsed.success, parsed.result, parsed.error

    @property
    def event_type(self) -> str:
        return self.envelope.type

    @property
    def correlation_id(self) -> str | None:
        return self.envelope.correlation_id

    @property
    def data(self) -> JsonValue:
        return self.envelope.data

    @property
    def next_state(self) -> str | None:
        """The state the plan's transitions lead to on this event, if any."""
        return self.plan.get_next_state(self)

    def variables(self) -> dict[str, Any]:
        """What conditions and templates see (see :mod:`disco.conditions`)."""
        variables = self.plan.variables()
        variables.update(
            {
                "success": self.success,
                "result": self.result,
                "error": self.error.model_dump(mode="json") if self.error else None,
                "data": self.envelope.data,
                "event": {
                    "type": self.envelope.type,
                    "id": self.envelope.id,
                    "correlation_id": self.envelope.correlation_id,
                    "source": self.envelope.source,
                    "topic": self.topic,
                },
            }
        )
        return variables


class PlanContext:
    """A running plan: its state machine, where it is, and what it gathered.

    Made by :meth:`GoalContext.start_plan` (or ``create_plan``), restored by the
    Planner for each answer. Every write carries the version it read.
    """

    def __init__(
        self,
        data: PlanContextData,
        platform: PlatformContext,
        planner: Planner,
        *,
        version: int | None = None,
    ) -> None:
        self._data = data
        self._platform = platform
        self._planner = planner
        self._version = version
        self._dirty = version is None
        self._started = time.monotonic()

    # -- what the plan is ---------------------------------------------------------------

    @property
    def plan_id(self) -> str:
        return self._data.plan_id

    @property
    def status(self) -> PlanStatus:
        return self._data.status

    @property
    def current_state(self) -> str | None:
        return self._data.current_state

    @property
    def goal_data(self) -> dict[str, JsonValue]:
        return self._data.goal_data

    @property
    def results(self) -> dict[str, JsonValue]:
        """Answers gathered so far, by the state whose action they answered."""
        return self._data.results

    @property
    def state(self) -> dict[str, JsonValue]:
        """The planner's own state (saved with the plan)."""
        return self._data.state

    @property
    def state_machine(self) -> dict[str, StateConfig]:
        return self._data.state_machine

    @property
    def session_id(self) -> str | None:
        return self._data.session_id

    @property
    def parent_plan_id(self) -> str | None:
        return self._data.parent_plan_id

    @property
    def history(self) -> list[PlanHistoryEntry]:
        return self._data.history

    @property
    def finished(self) -> bool:
        return self._data.status.is_final

    @property
    def dirty(self) -> bool:
        return self._dirty

    @property
    def version(self) -> int | None:
        return self._version

    def snapshot(self) -> PlanContextData:
        """A copy of the persisted form."""
        return self._data.model_copy(deep=True)

    def variables(self) -> dict[str, Any]:
        """What templates see (conditions add the triggering event's variables)."""
        return {
            "goal_data": self._data.goal_data,
            "results": self._data.results,
            "state": self._data.state,
            "plan": {
                "plan_id": self._data.plan_id,
                "current_state": self._data.current_state,
                "status": self._data.status.value,
                "session_id": self._data.session_id,
                "parent_plan_id": self._data.parent_plan_id,
            },
        }

    def is_complete(self) -> bool:
        """Whether the plan sits in a terminal state."""
        current = self._data.current_state
        config = self._data.state_machine.get(current) if current else None
        return bool(config and config.is_terminal)

    # -- persistence -------------------------------------------------------------------

    async def save(self) -> None:
        """Persist the plan (optimistically).

        Raises:
            TaskConflictError: another instance saved a newer version.
        """
        await self._store()

    async def _store(self) -> None:
        memory = self._platform.context_memory
        expected = self._version if self._version is not None else 0
        self._data.updated_at = _now()
        try:
            record = await memory.store_plan_context(
                self.plan_id,
                self._data,
                session_id=self._data.session_id,
                expected_version=expected,
            )
        except ServiceConflictError:
            raise TaskConflictError(self.plan_id, expected) from None
        self._version = record.version
        self._dirty = False

    def _check_open(self, action: str) -> None:
        if self._data.status.is_final:
            raise PlanError(f"plan {self.plan_id!r} is {self._data.status.value}: cannot {action}")

    # -- the state machine -------------------------------------------------------------

    def _config(self, name: str) -> StateConfig:
        config = self._data.state_machine.get(name)
        if config is None:
            raise PlanError(
                f"plan {self.plan_id!r} has no state {name!r}; its states: "
                f"{sorted(self._data.state_machine)}"
            )
        return config

    def get_next_state(self, trigger: TransitionContext) -> str | None:
        """The target of the first transition of the current state matching ``trigger``."""
        current = self._data.current_state
        if current is None:
            return None
        config = self._config(current)
        variables: dict[str, Any] | None = None
        for transition in config.transitions:
            if transition.on_event != trigger.event_type:
                continue
            if transition.condition is None:
                return transition.to_state
            if variables is None:
                variables = trigger.variables()
            if evaluate_condition(transition.condition, variables):
                return transition.to_state
        return None

    def record(self, trigger: TransitionContext) -> bool:
        """Take ``trigger`` in: no longer outstanding, its result kept under the current state.

        :meth:`execute_next` does this; an ``on_transition`` handler that decides
        otherwise may call it first. Returns whether it answers the current action.
        """
        answers = self._answers_current_action(trigger)
        if trigger.correlation_id in self._data.correlation_ids:
            self._data.correlation_ids.remove(trigger.correlation_id)
            self._dirty = True
        current = self._data.current_state
        if answers and current is not None:
            self._data.results[current] = trigger.result
            self._dirty = True
        return answers

    def _answers_current_action(self, trigger: TransitionContext) -> bool:
        current = self._data.current_state
        if current is None:
            return False
        action = self._config(current).action
        return action is not None and action.response_event == trigger.event_type

    async def start(self) -> None:
        """Start the plan: ``plan.started``, then enter the initial state."""
        self._check_open("start")
        self._data.status = PlanStatus.RUNNING
        await self._enter(self._data.initial_state, None, announce_start=True)
        data = self._data
        await self._record_plan(
            "create_plan",
            data.goal_event,
            data.response_event,
            goal_data=data.goal_data,
            plan_id=data.plan_id,
            plan_type=data.plan_type,
            session_id=data.session_id,
            parent_plan_id=data.parent_plan_id,
            status=data.status,
        )

    async def _record_plan(self, method: str, *args: Any, **kwargs: Any) -> None:
        # The plans listing (by session and status) is a convenience for
        # people and UIs; the plan itself lives in its context. Best effort.
        call = getattr(self._platform.memory, method, None)
        if call is None:
            return
        try:
            await call(*args, **kwargs)
        except Exception as exc:
            _log.info("plan record not updated", plan_id=self.plan_id, call=method, error=repr(exc))

    async def execute_next(self, trigger: TransitionContext | None = None) -> None:
        """Move the plan on.

        With ``trigger`` (an answer): record it, then follow the first matching
        transition; an answer to the current action that no transition takes
        follows ``default_next``, else fails the plan (a failed answer with its
        error, a successful one as a dead end). Without ``trigger``: enter the
        initial state if the plan has not started, else follow ``default_next``.
        """
        self._check_open("move it on")
        if trigger is None:
            if self._data.current_state is None:
                await self.start()
                return
            config = self._config(self._data.current_state)
            if config.default_next is not None:
                await self._enter(config.default_next, None)
            return
        answers = self.record(trigger)
        current = self._data.current_state
        if self._data.status is PlanStatus.PAUSED:
            if answers and current is not None and _is_human_action(self._config(current)):
                await self._resumed()
            else:
                # Held until resume(): a plan-level pause stops the machine.
                self._data.state[_HELD] = {
                    "envelope": trigger.envelope.model_dump(mode="json", exclude_none=True),
                    "topic": trigger.topic,
                }
                self._dirty = True
                await self._store()
                return
        target = self.get_next_state(trigger)
        if target is not None:
            await self._enter(target, trigger)
            return
        if not answers or current is None:
            await self._store()
            return
        config = self._config(current)
        if config.default_next is not None:
            await self._enter(config.default_next, trigger)
        elif not trigger.success:
            await self.fail(
                trigger.error
                or ErrorInfo(type="ActionFailed", message=f"{trigger.event_type} failed")
            )
        else:
            await self.fail(
                PlanError(
                    f"state {current!r} has no transition for {trigger.event_type!r} "
                    f"(conditions: {[t.condition for t in config.transitions]})"
                )
            )

    async def enter(self, state_name: str) -> None:
        """Move to ``state_name`` now (e.g. from an ``on_transition`` handler or LLM reasoning)."""
        self._check_open("enter a state of")
        await self._enter(state_name, None)

    def add_state(self, config: StateConfig) -> None:
        """Add or replace a state (plans reasoned out step by step grow while they run).

        Raises:
            PlanError: a transition's condition is not valid.
        """
        for transition in config.transitions:
            if transition.condition is not None:
                try:
                    check_condition(transition.condition)
                except ConditionError as exc:
                    raise PlanError(str(exc)) from None
        if config.state_name not in self._data.state_machine and (
            len(self._data.state_machine) >= MAX_PLAN_STATES
        ):
            raise PlanError(f"plan {self.plan_id!r} has {MAX_PLAN_STATES} states already")
        self._data.state_machine[config.state_name] = config
        self._dirty = True

    async def _enter(
        self, target: str, trigger: TransitionContext | None, *, announce_start: bool = False
    ) -> None:
        changes: list[tuple[int, PlanStateChangedData]] = []
        for _ in range(MAX_PLAN_STATES + 1):
            config = self._config(target)
            previous = self._data.current_state
            self._data.current_state = target
            self._data.history.append(
                PlanHistoryEntry(
                    from_state=previous,
                    to_state=target,
                    event_type=trigger.event_type if trigger else None,
                    event_id=trigger.envelope.id if trigger else None,
                    at=_now(),
                )
            )
            changes.append(
                (len(self._data.history) - 1, self._state_changed(self._data.history[-1]))
            )
            self._data.current_action = None
            self._dirty = True
            trigger = None
            if config.is_terminal:
                await self._announce(changes, announce_start)
                if config.is_failure:
                    await self.fail(
                        ErrorInfo(
                            type="PlanFailed",
                            message=f"the plan ended in its failure state {target!r}",
                            details={"results": self._data.results},
                        )
                    )
                else:
                    await self.finalize()
                return
            if config.action is not None:
                pending, payload = self._prepare_action(config)
                human = _is_human_action(config)
                if human:
                    self._data.status = PlanStatus.PAUSED
                    self._data.pause_reason = f"awaiting human input in state {target!r}"
                else:
                    await self._platform.validate_request(pending.event_type, payload)
                await self._store()
                crash_point(CrashPoint.PLAN_ACTION)
                await self._send_action(pending, payload)
                await self._announce(changes, announce_start)
                if human:
                    await self._announce_paused(id=derived_id(pending.correlation_id, "paused"))
                return
            if config.default_next is None:
                await self._store()
                await self._announce(changes, announce_start)
                return
            target = config.default_next
        raise PlanError(f"plan {self.plan_id!r} loops through default_next without an action")

    def _action_payload(self, config: StateConfig) -> JsonValue:
        """The payload of ``config``'s action, its template filled from the plan now."""
        action = config.action
        assert action is not None
        try:
            data = render_template(action.data or {}, self.variables())
        except TemplateError as exc:
            raise PlanError(f"state {config.state_name!r}: {exc}") from None
        if not _is_human_action(config):
            rendered: JsonValue = data
            return rendered
        if not isinstance(data, dict) or not isinstance(data.get("question"), str):
            raise PlanError(
                f"state {config.state_name!r} asks a human: its action data needs a "
                "'question' (text)"
            )
        body = HumanInputRequest(
            question=data["question"],
            response_event=action.response_event,
            timeout_seconds=data.get("timeout_seconds"),
            plan_id=self.plan_id,
            options=data.get("options"),
            context={k: v for k, v in data.items() if k not in _HUMAN_KEYS},
        )
        return body.model_dump(mode="json")  # as published before: every key, nulls too

    def _prepare_action(self, config: StateConfig) -> tuple[PendingAction, JsonValue]:
        """Record the action of the state being entered as pending (published after the save)."""
        action = config.action
        assert action is not None
        payload = self._action_payload(config)
        correlation_id = self._planner._correlation_id(self.plan_id, len(self._data.history))
        self._data.correlation_ids.append(correlation_id)
        human = _is_human_action(config)
        # Kept so that any instance can publish it again after a crash; one too
        # large to keep is rendered again from the template then.
        kept = json_size(payload) <= KEPT_PAYLOAD_MAX_BYTES
        pending = PendingAction(
            correlation_id=correlation_id,
            request_id=derived_id(correlation_id, "request"),
            state_name=config.state_name,
            topic=(Topic.NOTIFICATION_EVENTS if human else Topic.ACTION_REQUESTS).value,
            event_type=NotificationType.HUMAN_INPUT.value if human else action.event_type,
            response_event=action.response_event,
            data=payload if kept else None,
            data_kept=kept,
            caused_by=current_cause(),
            sent_at=_now(),
        )
        self._data.current_action = pending
        return pending, payload

    async def _send_action(self, pending: PendingAction, payload: JsonValue) -> None:
        """Publish a pending action as its record describes it (the first time or again)."""
        request = pending.topic == Topic.ACTION_REQUESTS.value
        await publish_again(
            self._platform.bus,
            pending.topic,
            pending.event_type,
            payload,
            id=pending.request_id,
            time=pending.sent_at,
            traceparent=self._data.traceparent,
            correlation_id=pending.correlation_id,
            causation_id=pending.caused_by,
            response_event=pending.response_event if request else None,
            response_topic=Topic.ACTION_RESULTS.value if request else None,
            **self._scope(),
        )

    def _scope(self) -> dict[str, Any]:
        scope: dict[str, Any] = {"plan_id": self.plan_id}
        for key in ("tenant_id", "user_id", "session_id"):
            value = getattr(self._data, key)
            if value is not None:
                scope[key] = value
        return scope

    # -- lifecycle events --------------------------------------------------------------

    def _state_changed(self, entry: PlanHistoryEntry) -> PlanStateChangedData:
        return PlanStateChangedData(
            plan_id=self.plan_id,
            agent_name=self._data.agent_name,
            agent_id=self._data.agent_id,
            from_state=entry.from_state,
            to_state=entry.to_state,
            trigger_event=entry.event_type,
            trigger_event_id=entry.event_id,
            status=PlanStatus.RUNNING if self._data.status.is_final else self._data.status,
        )

    async def _announce(self, changes: list[tuple[int, PlanStateChangedData]], start: bool) -> None:
        # Ids derive from the plan and the step, so announcing again after a
        # crash (see Planner._recover) is deduplicated by readers.
        bus = self._platform.bus
        if start:
            await publish_system_event(
                bus,
                SystemEventType.PLAN_STARTED,
                PlanStartedData(
                    plan_id=self.plan_id,
                    agent_name=self._data.agent_name,
                    agent_id=self._data.agent_id,
                    goal_event=self._data.goal_event,
                    plan_type=self._data.plan_type,
                    initial_state=self._data.initial_state,
                    session_id=self._data.session_id,
                    parent_plan_id=self._data.parent_plan_id,
                ),
                id=derived_id(self.plan_id, "started"),
                plan_id=self.plan_id,
            )
        for index, change in changes:
            await publish_system_event(
                bus,
                SystemEventType.PLAN_STATE_CHANGED,
                change,
                id=derived_id(self.plan_id, "state", str(index)),
                plan_id=self.plan_id,
            )

    async def _announce_again(self, pending: PendingAction) -> None:
        """Announce again the moves that entered the current state (a recovery's publishing).

        They are the history entries the handling that saved ``pending`` made:
        from the last one an event triggered (or the plan's start) to the end.
        """
        history = self._data.history
        first = len(history) - 1
        while first > 0 and history[first].event_id is None:
            first -= 1
        changes = [(i, self._state_changed(history[i])) for i in range(first, len(history))]
        await self._announce(changes, start=history[first].from_state is None)
        if pending.topic == Topic.NOTIFICATION_EVENTS.value:
            await self._announce_paused(id=derived_id(pending.correlation_id, "paused"))

    async def _announce_paused(self, *, id: str | None = None) -> None:
        await publish_system_event(
            self._platform.bus,
            SystemEventType.PLAN_PAUSED,
            PlanPausedData(
                plan_id=self.plan_id,
                agent_name=self._data.agent_name,
                agent_id=self._data.agent_id,
                reason=self._data.pause_reason or "",
                current_state=self._data.current_state,
            ),
            id=id,
            plan_id=self.plan_id,
        )

    async def _resumed(self) -> None:
        self._data.status = PlanStatus.RUNNING
        self._data.pause_reason = None
        self._dirty = True
        await self._record_plan("update_plan_status", self.plan_id, PlanStatus.RUNNING)
        await publish_system_event(
            self._platform.bus,
            SystemEventType.PLAN_RESUMED,
            PlanResumedData(
                plan_id=self.plan_id,
                agent_name=self._data.agent_name,
                agent_id=self._data.agent_id,
                current_state=self._data.current_state,
            ),
            plan_id=self.plan_id,
        )

    # -- pause / resume ---------------------------------------------------------------

    async def pause(self, reason: str = "paused") -> None:
        """Halt the plan at a plan-level gate (no timeout) until :meth:`resume`.

        Answers that arrive meanwhile are kept and move the plan on resume. A
        plan made with :meth:`GoalContext.new_plan` may be paused before it
        starts: :meth:`resume` then starts it.
        """
        self._check_open("pause")
        if self._data.status is PlanStatus.PAUSED:
            return
        self._data.status = PlanStatus.PAUSED
        self._data.pause_reason = reason[:1000]
        self._dirty = True
        await self._store()
        await self._announce_paused()
        await self._record_plan(
            "update_plan_status", self.plan_id, PlanStatus.PAUSED, reason=reason
        )

    async def resume(
        self, input_data: Mapping[str, Any] | None = None, *, to_state: str | None = None
    ) -> None:
        """Continue a paused plan.

        ``input_data`` is kept in ``results["user_input"]``. Then: an answer held
        while paused moves the plan; else ``to_state`` is entered if given; else
        the current state's ``default_next``; else the plan waits for events.

        Raises:
            PlanError: the plan is not paused.
        """
        self._check_open("resume")
        if self._data.status is not PlanStatus.PAUSED:
            raise PlanError(f"plan {self.plan_id!r} is {self._data.status.value}, not paused")
        if input_data is not None:
            self._data.results["user_input"] = to_json(dict(input_data))
        await self._resumed()
        held = self._data.state.pop(_HELD, None)
        if isinstance(held, dict):
            envelope = Envelope.model_validate(held["envelope"])
            trigger = TransitionContext(envelope, self, str(held["topic"]))
            target = self.get_next_state(trigger)
            if target is not None:
                await self._enter(target, trigger)
                return
        if to_state is not None:
            await self._enter(to_state, None)
            return
        current = self._data.current_state
        if current is None:
            # Paused before it started (a gate in front of the whole plan).
            await self._enter(self._data.initial_state, None, announce_start=True)
            return
        if current is not None and (nxt := self._config(current).default_next) is not None:
            await self._enter(nxt, None)
            return
        await self._store()

    # -- the end -------------------------------------------------------------------------

    async def finalize(self, result: Any = None) -> None:
        """Complete the plan and answer the goal's ``response_event`` (exactly once).

        ``result`` defaults to the results gathered, by state.
        """
        self._check_open("finalize")
        final = to_json(result) if result is not None else dict(self._data.results)
        outcome = ActionResultData(success=True, result=final)
        self._data.results["final"] = final
        await self._end(outcome, PlanStatus.COMPLETED)

    async def fail(self, error: ErrorInfo | BaseException | str) -> None:
        """End the plan as failed and answer the goal with the error (exactly once)."""
        self._check_open("fail")
        info = (
            error
            if isinstance(error, ErrorInfo)
            else error_info(error)
            if isinstance(error, BaseException)
            else ErrorInfo(type="PlanFailed", message=str(error)[:4000])
        )
        await self._end(ActionResultData(success=False, error=info), PlanStatus.FAILED)

    async def _end(self, outcome: ActionResultData, status: PlanStatus) -> None:
        self._data.status = status
        self._data.pause_reason = None
        self._data.correlation_ids = []
        self._data.current_action = None
        self._data.state.pop(_HELD, None)
        self._data.outcome = outcome
        self._data.outcome_sent = False
        self._data.finished_by = current_cause()
        await self._store()
        crash_point(CrashPoint.PLAN_FINISHED)
        await self._publish_end()

    async def _publish_end(self) -> None:
        """Answer the goal and announce the end (ids derived: repeatable), then note it was sent."""
        data = self._data
        outcome, status = data.outcome, data.status
        assert outcome is not None
        bus = self._platform.bus
        await answer(
            bus,
            data.response_event,
            outcome.model_dump(mode="json", exclude_none=True),
            correlation_id=data.goal_correlation_id or data.plan_id,
            topic=data.response_topic,
            id=derived_id(data.plan_id, "answer"),
            **{**self._scope(), "plan_id": data.parent_plan_id or data.plan_id},
        )
        await self._record_plan(
            "update_plan_status",
            data.plan_id,
            status,
            reason=outcome.error.message[:1000] if outcome.error else None,
        )
        if outcome.success:
            await publish_system_event(
                bus,
                SystemEventType.PLAN_COMPLETED,
                PlanCompletedData(
                    plan_id=data.plan_id,
                    agent_name=data.agent_name,
                    agent_id=data.agent_id,
                    final_state=data.current_state,
                    result=outcome.result,
                ),
                id=derived_id(data.plan_id, "completed"),
                plan_id=data.plan_id,
            )
        else:
            assert outcome.error is not None
            await publish_system_event(
                bus,
                SystemEventType.PLAN_FAILED,
                PlanFailedData(
                    plan_id=data.plan_id,
                    agent_name=data.agent_name,
                    agent_id=data.agent_id,
                    error=outcome.error,
                    final_state=data.current_state,
                ),
                id=derived_id(data.plan_id, "failed"),
                plan_id=data.plan_id,
            )
        # Noted so that a stale answer later does not publish it again; if this
        # write is lost, the worst case is one more (deduplicated) answer.
        data.outcome_sent = True
        try:
            await self._store()
        except Exception as exc:
            _log.info("plan end not noted as sent", plan_id=self.plan_id, error=repr(exc))


_HUMAN_KEYS = frozenset({"question", "timeout_seconds", "options"})


class GoalContext(Generic[InputT]):
    """A goal to achieve: the request that starts a plan.

    ``start_plan`` runs a state machine for it; ``complete``/``fail`` answer it
    directly (a goal needs no plan when the answer is at hand).
    """

    def __init__(
        self, envelope: ActionRequest, platform: PlatformContext, planner: Planner, input: InputT
    ) -> None:
        self.envelope = envelope
        self.input: InputT = input
        self._platform = platform
        self._planner = planner
        self.plan: PlanContext | None = None
        self._answered = False

    @property
    def goal_event(self) -> str:
        return self.envelope.type

    @property
    def data(self) -> JsonValue:
        return self.envelope.data

    @property
    def response_event(self) -> str:
        return self.envelope.response_event

    @property
    def session_id(self) -> str | None:
        return self.envelope.session_id

    @property
    def parent_plan_id(self) -> str | None:
        """The plan that asked for this goal (a nested sub-plan), if any."""
        return self.envelope.plan_id

    @property
    def answered(self) -> bool:
        return self._answered or (self.plan is not None and self.plan.finished)

    def new_plan(
        self,
        states: States,
        *,
        initial_state: str | None = None,
        plan_type: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> PlanContext:
        """A plan for this goal over ``states`` (checked now), not yet started.

        Raises:
            PlanError: the state machine or a condition is not valid.
        """
        definition = _definition(states, initial_state, plan_type)
        request = self.envelope
        goal_data: dict[str, JsonValue] = (
            request.data if isinstance(request.data, dict) else {"value": request.data}
        )
        now = _now()
        data = PlanContextData(
            plan_id=derived_id(request.id, "plan"),
            plan_type=plan_type
            or (definition.plan_type if definition.plan_type != "plan" else None),
            goal_event=request.type,
            goal_data=goal_data,
            response_event=request.response_event,
            response_topic=request.response_topic,
            goal_correlation_id=request.correlation_id or request.id,
            goal_request_id=request.id,
            initial_state=definition.initial_state,
            state_machine=dict(definition.states),
            state=dict(state or {}),
            parent_plan_id=request.plan_id,
            session_id=request.session_id,
            tenant_id=request.tenant_id,
            user_id=request.user_id,
            agent_id=self._planner.identity.agent_id,
            agent_name=self._planner.name,
            traceparent=request.traceparent,
            created_at=now,
            updated_at=now,
        )
        plan = PlanContext(data, self._platform, self._planner)
        self.plan = plan
        return plan

    async def start_plan(
        self,
        states: States,
        *,
        initial_state: str | None = None,
        plan_type: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> PlanContext:
        """Make a plan over ``states`` for this goal and start it.

        Raises:
            PlanError: the state machine, a condition or a template is not valid.
        """
        plan = self.new_plan(states, initial_state=initial_state, plan_type=plan_type, state=state)
        await plan.start()
        return plan

    async def complete(self, result: Any = None) -> None:
        """Answer the goal with success, without a plan."""
        await self._answer(ActionResultData(success=True, result=to_json(result)))

    async def fail(self, error: ErrorInfo | BaseException | str) -> None:
        """Answer the goal with an error, without a plan."""
        info = (
            error
            if isinstance(error, ErrorInfo)
            else error_info(error)
            if isinstance(error, BaseException)
            else ErrorInfo(type="GoalFailed", message=str(error)[:4000])
        )
        await self._answer(ActionResultData(success=False, error=info))

    async def _answer(self, outcome: ActionResultData) -> None:
        if self.answered:
            raise PlanError(f"goal {self.envelope.id!r} is already answered")
        self._answered = True
        request = self.envelope
        await self._platform.bus.respond(
            request.response_event,
            outcome.model_dump(mode="json", exclude_none=True),
            correlation_id=request.correlation_id or request.id,
            topic=request.response_topic,
            id=derived_id(request.id, "answer"),
        )


class Planner(Agent):
    """An autonomous agent: each goal runs as a state machine of requests and answers.

    Declare a goal and its plan in one line (no handler code)::

        planner.add_plan("trip.requested", PlanDefinition(...))

    or handle the goal yourself and start a plan from it::

        @planner.on_goal("research.goal")
        async def plan_research(goal: GoalContext, context: PlatformContext) -> None:
            await goal.start_plan(states)

    Answers move plans automatically; ``@planner.on_transition()`` takes over that
    step (e.g. to reason with an LLM). ``llm=`` enables :meth:`create_plan` and
    :meth:`reason_next_action`; the rest works without one.

    Args:
        llm: an :class:`disco.llm.LLMDriver` for LLM reasoning (optional).
        **options: as for :class:`Agent`.
    """

    kind = "planner"

    def __init__(self, name: str, *, llm: LLMDriver | None = None, **options: Any) -> None:
        super().__init__(name, **options)
        self.llm = llm
        self._marker = derived_id("planner", name).replace("-", "")[:10]
        self._transition: Callable[..., Awaitable[Any]] | None = None
        self._transition_takes_context = False
        self._answer_routes = False
        # Answers the declared plans wait for, by (topic, event type). When every
        # goal runs a declared plan, the planner subscribes to exactly these;
        # a goal handler, on_transition or an LLM may make any plan, and then it
        # reads every answer type (still filtered by correlation id, unparsed
        # envelopes of other types are skipped by the bus).
        self._declared: set[tuple[str, str]] = set()
        self._dynamic = llm is not None
        self._adding_plan = False
        self._resent = ResendMemo(_RESEND_GRACE.total_seconds())

    # -- ids -----------------------------------------------------------------------------

    def _correlation_id(self, plan_id: str, step: int) -> str:
        return f"plan.{self._marker}.{plan_id}.{step}"

    def _plan_id_of(self, correlation_id: str | None) -> str | None:
        if not correlation_id or not correlation_id.startswith("plan."):
            return None
        parts = correlation_id.split(".")
        if len(parts) != 4 or parts[1] != self._marker:
            return None
        return parts[2]

    # -- declaring -----------------------------------------------------------------------

    def on_goal(
        self,
        event_type: str,
        *,
        capability: str | None = None,
        description: str | None = None,
        response_event: str | None = None,
    ) -> Callable[[HandlerT], HandlerT]:
        """Decorator: handle goal requests of ``event_type`` on ``action-requests``.

        The handler is ``async def handler(goal: GoalContext, context:
        PlatformContext)``; it starts a plan (``goal.start_plan(...)``) or answers
        the goal (``goal.complete``/``goal.fail``). An exception answers the goal
        with an error.
        """

        def register(handler: HandlerT) -> HandlerT:
            spec = inspect_handler(
                handler,
                decorator="on_goal",
                first="goal: GoalContext",
                context_types=(GoalContext,),
                allow_model_argument=False,
                check_return=False,
            )
            derived = capability_for(
                spec,
                event_type,
                capability=capability,
                description=description,
                response_event=response_event,
            )
            if not self._adding_plan:
                self._dynamic = True
            planner = self
            name = describe(handler)
            model = spec.input_model

            async def dispatch(envelope: Envelope) -> None:
                request: ActionRequest = envelope  # type: ignore[assignment]
                platform = planner.context
                try:
                    goal_input = model.model_validate(request.data) if model else request.data
                except ValidationError as exc:
                    await GoalContext(request, platform, planner, None).fail(exc)
                    return
                goal = GoalContext(request, platform, planner, goal_input)
                await planner._run_goal(goal, handler, spec.takes_context, name)

            self._add_route(Topic.ACTION_REQUESTS.value, event_type, dispatch, name, internal=True)
            self._derive_capability(derived)
            return handler

        return register

    def add_plan(
        self,
        event_type: str,
        definition: PlanDefinition,
        *,
        capability: str | None = None,
        description: str | None = None,
    ) -> None:
        """Run ``definition`` for every ``event_type`` goal (no handler code needed).

        Raises:
            PlanError: a condition is not valid.
        """
        checked = _definition(definition, None, None)

        async def run(goal: GoalContext[Any]) -> None:
            await goal.start_plan(checked, plan_type=checked.plan_type)

        run.__doc__ = description or checked.description or f"Runs the {checked.plan_type} plan."
        run.__qualname__ = f"{self.name}.plan[{checked.plan_type}]"
        self._adding_plan = True
        try:
            self.on_goal(event_type, capability=capability, description=description)(run)
        finally:
            self._adding_plan = False
        for config in checked.states.values():
            if config.action is not None:
                topic = (
                    Topic.NOTIFICATION_EVENTS.value
                    if _is_human_action(config)
                    else Topic.ACTION_RESULTS.value
                )
                self._declared.add((topic, config.action.response_event))

    def on_transition(self) -> Callable[[HandlerT], HandlerT]:
        """Decorator: take over moving plans on when an answer arrives.

        The handler is ``async def handler(transition: TransitionContext,
        context: PlatformContext)``; ``transition.plan`` is the restored plan
        and ``transition.next_state`` where its state machine would go. Call
        ``await transition.plan.execute_next(transition)`` for the default, or
        decide otherwise (``plan.enter``, ``plan.finalize``, LLM reasoning).
        """

        def register(handler: HandlerT) -> HandlerT:
            if self._transition is not None:
                raise AgentError(
                    f"planner {self.name!r} already has an on_transition handler "
                    f"({describe(self._transition)})"
                )
            spec = inspect_handler(
                handler,
                decorator="on_transition",
                first="transition: TransitionContext",
                context_types=(TransitionContext,),
                allow_model_argument=False,
                check_return=False,
            )
            self._transition = handler
            self._transition_takes_context = spec.takes_context
            self._dynamic = True
            return handler

        return register

    def _check_ready_to_start(self) -> None:
        if not self._answer_routes:
            # Answers come back on action-results (requests, sub-plans) and
            # notification-events (humans); both are filtered by correlation id.
            if self._dynamic:
                wanted = {
                    (topic, ANY_EVENT)
                    for topic in (Topic.ACTION_RESULTS.value, Topic.NOTIFICATION_EVENTS.value)
                }
            else:
                wanted = set(self._declared)
            for topic, event_type in sorted(wanted):
                if (topic, event_type) not in self._routes:
                    self._add_route(
                        topic,
                        event_type,
                        self._answer_dispatcher(topic),
                        f"{self.name}.transitions",
                        internal=True,
                    )
            self._answer_routes = True
        super()._check_ready_to_start()

    # -- restoring -----------------------------------------------------------------------

    async def restore_plan(self, plan_id: str) -> PlanContext | None:
        """The plan ``plan_id`` from memory (``None`` if unknown).

        Inside a handler whose envelope already moved this plan (it is being
        redelivered: its first handling died after saving the plan and before
        publishing), the action or answer that handling saved is published
        first, so that e.g. a gate opened by an external event does not stay
        stuck when the process dies while opening it.
        """
        plan = await self._load(plan_id)
        if plan is not None:
            await self._recover(plan, current_cause(), by_age=False)
        return plan

    async def _load(self, plan_id: str) -> PlanContext | None:
        platform = self.context
        record = await platform.context_memory.get_plan_context(plan_id)
        if record is None:
            return None
        return PlanContext(record.context, platform, self, version=record.version)

    async def find_plan(self, correlation_id: str) -> PlanContext | None:
        """The plan waiting for ``correlation_id`` (its own actions' ids, or ids it registered)."""
        plan_id = self._plan_id_of(correlation_id)
        if plan_id is not None:
            return await self.restore_plan(plan_id)
        platform = self.context
        record = await platform.context_memory.get_plan_by_correlation(correlation_id)
        if record is None:
            return None
        plan = PlanContext(record.context, platform, self, version=record.version)
        await self._recover(plan, current_cause(), by_age=False)
        return plan

    async def _recover(self, plan: PlanContext, cause: str | None, *, by_age: bool = True) -> int:
        """Publish again what a saved plan promised but may never have been published.

        Due is the current action, or the goal's answer of a finished plan,
        that ``cause`` (the envelope being handled) brought about: it comes
        again only because its first handling did not finish. With ``by_age``,
        also a current action older than a grace period (at most once per grace
        by this process) and an answer still unconfirmed after one. Both go out
        with their first ids (receivers deduplicate; a second answer is stale).

        Returns:
            How many envelopes were published again.
        """
        data = plan._data
        now = _now()

        def due(key: str, caused_by: str | None, since: datetime | None, grace: timedelta) -> bool:
            if cause is not None and caused_by == cause:
                return True
            return by_age and since is not None and now - since > grace and self._resent.due(key)

        if data.status.is_final:
            if data.outcome is None or data.outcome_sent:
                return 0
            if not due(data.plan_id, data.finished_by, data.updated_at, _FINISHER_GRACE):
                return 0
            _log.info("answering a finished plan's goal again", plan_id=data.plan_id)
            await plan._publish_end()
            self._resent.sent(data.plan_id)
            return 1
        pending = data.current_action
        if pending is None or pending.correlation_id not in data.correlation_ids:
            return 0
        if not due(pending.correlation_id, pending.caused_by, pending.sent_at, _RESEND_GRACE):
            return 0
        if pending.data_kept:
            payload = pending.data
        else:
            config = data.state_machine.get(pending.state_name)
            if config is None or config.action is None:
                return 0
            payload = plan._action_payload(config)
        _log.info(
            "publishing a plan's action again",
            plan_id=data.plan_id,
            state=pending.state_name,
            correlation_id=pending.correlation_id,
        )
        await plan._send_action(pending, payload)
        self._resent.sent(pending.correlation_id)
        await plan._announce_again(pending)
        return 1

    # -- running -------------------------------------------------------------------------

    async def _run_goal(
        self,
        goal: GoalContext[Any],
        handler: Callable[..., Awaitable[Any]],
        takes_context: bool,
        name: str,
    ) -> None:
        try:
            if takes_context:
                await handler(goal, self.context)
            else:
                await handler(goal)
        except TaskConflictError:
            _log.info("goal already taken up (redelivered); skipping", goal=goal.envelope.id)
            plan = goal.plan
            if plan is not None and plan.version is None:
                # The goal came again: its first handling saved the plan and may
                # have died before publishing what it saved.
                stored = await self._load(plan.plan_id)
                if stored is not None:
                    await self._recover(stored, goal.envelope.id, by_age=False)
        except _TRANSIENT:
            raise
        except Exception as exc:
            _log.warning("goal handler failed", handler=name, error=repr(exc))
            plan = goal.plan
            if plan is not None and plan.version is not None:
                if not plan.finished:
                    with contextlib.suppress(TaskConflictError):
                        await plan.fail(exc)
            elif not goal.answered:
                await goal.fail(exc)

    def _answer_dispatcher(self, topic: str) -> Callable[[Envelope], Awaitable[None]]:
        async def dispatch(envelope: Envelope) -> None:
            plan_id = self._plan_id_of(envelope.correlation_id)
            if plan_id is None or envelope.type == NotificationType.HUMAN_INPUT.value:
                return  # not an answer to one of this planner's actions (or its own question)
            await self._move(plan_id, envelope, topic)

        return dispatch

    async def _move(self, plan_id: str, envelope: Envelope, topic: str) -> None:
        for attempt in range(1, _CONFLICT_RETRIES + 1):
            plan = await self._load(plan_id)
            if plan is None:
                return
            if plan.finished or envelope.correlation_id not in plan._data.correlation_ids:
                _log.debug(
                    "answer ignored (duplicate or late)", correlation_id=envelope.correlation_id
                )
                # This answer may be redelivered because the handling that
                # recorded it died before publishing what it saved.
                await self._recover(plan, envelope.id)
                return
            transition = TransitionContext(envelope, plan, topic)
            try:
                try:
                    if self._transition is None:
                        await plan.execute_next(transition)
                    elif self._transition_takes_context:
                        await self._transition(transition, self.context)
                    else:
                        await self._transition(transition)
                    if plan.dirty and not plan.finished:
                        if envelope.correlation_id in plan._data.correlation_ids:
                            plan._data.correlation_ids.remove(envelope.correlation_id)
                        await plan.save()
                    return
                except (TaskConflictError, *_TRANSIENT):
                    raise
                except Exception as exc:
                    _log.warning(
                        "plan step failed; failing the plan", plan_id=plan_id, error=repr(exc)
                    )
                    if not plan.finished:
                        await plan.fail(exc)
                    return
            except TaskConflictError:
                if attempt == _CONFLICT_RETRIES:
                    raise
                await asyncio.sleep(random.uniform(0, 0.005 * attempt))

    # -- LLM reasoning --------------------------------------------------------------------

    def _require_llm(self, what: str) -> LLMDriver:
        if self.llm is None:
            raise AgentError(
                f"{what} needs an LLM: create the planner with Planner(..., llm=driver), e.g. "
                "disco.llm.OpenAICompatibleDriver(...) or disco.llm.ScriptedDriver([...]) in tests"
            )
        return self.llm

    async def create_plan(
        self, goal: GoalContext[Any], agents: Sequence[Any] | None = None
    ) -> PlanContext:
        """Ask the LLM for a state machine that achieves ``goal`` with the ``agents`` discovered.

        The answer is checked like any plan (structure, conditions); an invalid
        answer is sent back to the LLM once with the error. Returns the plan,
        not yet started (``await plan.start()``).

        Raises:
            AgentError: the planner has no LLM.
            PlanError: the LLM did not produce a valid plan.
        """
        from disco.llm import plan_from_llm

        llm = self._require_llm("create_plan")
        definition = await plan_from_llm(llm, goal.goal_event, goal.data, agents or [])
        return goal.new_plan(definition, plan_type=definition.plan_type)

    async def reason_next_action(self, transition: TransitionContext) -> None:
        """Let the LLM decide the next step of a plan from the event that arrived.

        The LLM either asks for another action (added as a new state and entered),
        finalizes the plan with a result, or fails it.

        Raises:
            AgentError: the planner has no LLM.
        """
        from disco.llm import next_step_from_llm

        llm = self._require_llm("reason_next_action")
        plan = transition.plan
        plan.record(transition)
        step = await next_step_from_llm(llm, plan.snapshot(), transition.variables())
        if step.kind == "finalize":
            await plan.finalize(step.result)
        elif step.kind == "fail":
            await plan.fail(step.reason or "the planner gave up")
        else:
            assert step.action is not None
            name = f"step-{len(plan.history)}"
            plan.add_state(
                StateConfig(
                    state_name=name,
                    description=step.reason or "",
                    action=step.action,
                    transitions=[],
                )
            )
            await plan.enter(name)
