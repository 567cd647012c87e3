"""A running plan: :class:`PlanContext`, its state machine, where it is and what it gathered;
and :class:`TransitionContext`, an event that may move it.

Entering a state with an action saves the plan with the action as it will be
published (:class:`~disco_common.plans.PendingAction`), then publishes it;
ending saves the outcome, then answers the goal (see :mod:`disco.agents._durable`
for why, and ``_plan_wire.py`` for what is published).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog
from pydantic import JsonValue

from disco._faults import CrashPoint, crash_point
from disco.agents._answers import AnswerView
from disco.agents._common import derived_id
from disco.agents._durable import (
    KEPT_PAYLOAD_MAX_BYTES,
    DurableContext,
    SavedCopies,
    as_error,
    current_cause,
    json_size,
    utc_now,
)
from disco.agents._errors import PlanConflictError, PlanError
from disco.agents._handlers import to_json
from disco.agents._plan_machine import check_conditions, is_human_action
from disco.agents._plan_wire import (
    Moves,
    announce_end,
    announce_moves,
    announce_paused,
    announce_resumed,
    answer_goal,
    send_action,
    state_changed,
)
from disco.agents._ports import PlanRecords
from disco.conditions import TemplateError, evaluate_condition, render_template
from disco_common.envelope import Envelope
from disco_common.memory import PlanContextRecord
from disco_common.notifications import HumanInputRequest, NotificationType
from disco_common.plans import (
    MAX_PLAN_STATES,
    PendingAction,
    PlanContextData,
    PlanHistoryEntry,
    PlanStatus,
    StateConfig,
)
from disco_common.tasks import ActionResultData, ErrorInfo
from disco_common.topics import Topic

if TYPE_CHECKING:
    from disco.agents._platform import PlatformContext

__all__ = ["HELD", "PlanContext", "PlanOwner", "TransitionContext"]

_log = structlog.get_logger("disco.agents")

HELD = "_disco_held_answer"
"""The key in a plan's ``state`` of an answer that arrived while the plan was paused."""
HUMAN_KEYS = frozenset({"question", "timeout_seconds", "options"})
"""Keys of a human action's data that make the question; the others are its context."""


@dataclass(frozen=True, slots=True)
class PlanOwner:
    """What a :class:`PlanContext` needs of the Planner that runs it.

    Attributes:
        copies: the copies of plans this process saved last, waiting for answers.
        correlation_id: the correlation id of a plan's action at a step (the
            Planner reads its answers by it).
    """

    copies: SavedCopies[PlanContextData]
    correlation_id: Callable[[str, int], str]


class PlanContext(DurableContext[PlanContextData]):
    """A running plan: its state machine, where it is, and what it gathered.

    Made by :meth:`GoalContext.start_plan` (or ``create_plan``), restored by the
    Planner for each answer. Every write carries the version it read.
    """

    def __init__(
        self,
        data: PlanContextData,
        platform: PlatformContext,
        owner: PlanOwner,
        *,
        version: int | None = None,
    ) -> None:
        super().__init__(data, platform, version=version, copies=owner.copies)
        self._owner = owner

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
        """Whether the plan completed or failed."""
        return self._data.status.is_final

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
            PlanConflictError: another instance saved a newer version.
        """
        await self._store()

    async def _write(self, expected_version: int) -> PlanContextRecord:
        return await self._platform.context_memory.store_plan_context(
            self.plan_id,
            self._data,
            session_id=self._data.session_id,
            expected_version=expected_version,
        )

    @property
    def _key(self) -> str:
        return self._data.plan_id

    def _conflict(self, expected_version: int) -> PlanConflictError:
        return PlanConflictError(self.plan_id, expected_version)

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
            lambda plans: plans.create_plan(
                data.goal_event,
                data.response_event,
                goal_data=data.goal_data,
                plan_id=data.plan_id,
                plan_type=data.plan_type,
                session_id=data.session_id,
                parent_plan_id=data.parent_plan_id,
                status=data.status,
            ),
        )

    async def _record_plan(
        self, what: str, call: Callable[[PlanRecords], Awaitable[object]]
    ) -> None:
        # The plans listing (by session and status) is a convenience for
        # people and UIs; the plan itself lives in its context. Best effort.
        try:
            await call(self._platform.memory)
        except Exception as exc:
            _log.info("plan record not updated", plan_id=self.plan_id, call=what, error=repr(exc))

    async def _record_status(self, status: PlanStatus, reason: str | None = None) -> None:
        await self._record_plan(
            "update_plan_status",
            lambda plans: plans.update_plan_status(self.plan_id, status, reason=reason),
        )

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
            if answers and current is not None and is_human_action(self._config(current)):
                await self._resumed()
            else:
                # Held until resume(): a plan-level pause stops the machine.
                self._data.state[HELD] = {
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
        check_conditions(config)
        if config.state_name not in self._data.state_machine and (
            len(self._data.state_machine) >= MAX_PLAN_STATES
        ):
            raise PlanError(f"plan {self.plan_id!r} has {MAX_PLAN_STATES} states already")
        self._data.state_machine[config.state_name] = config
        self._dirty = True

    async def _enter(
        self, target: str, trigger: TransitionContext | None, *, announce_start: bool = False
    ) -> None:
        changes: Moves = []
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
                    at=utc_now(),
                )
            )
            changes.append(
                (
                    len(self._data.history) - 1,
                    state_changed(self._data, self._data.history[-1], len(self._data.history) - 1),
                )
            )
            self._data.current_action = None
            self._dirty = True
            trigger = None
            if config.is_terminal:
                await announce_moves(self._platform, self._data, changes, start=announce_start)
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
                human = is_human_action(config)
                if human:
                    self._data.status = PlanStatus.PAUSED
                    self._data.pause_reason = f"awaiting human input in state {target!r}"
                else:
                    await self._platform.validate_request(pending.event_type, payload)
                await self._store()
                crash_point(CrashPoint.PLAN_ACTION)
                await send_action(self._platform, self._data, pending, payload)
                await announce_moves(self._platform, self._data, changes, start=announce_start)
                if human:
                    await announce_paused(
                        self._platform,
                        self._data,
                        id=derived_id(pending.correlation_id, "paused"),
                    )
                return
            if config.default_next is None:
                await self._store()
                await announce_moves(self._platform, self._data, changes, start=announce_start)
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
        if not is_human_action(config):
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
            context={k: v for k, v in data.items() if k not in HUMAN_KEYS},
        )
        return body.model_dump(mode="json")  # as published before: every key, nulls too

    def _prepare_action(self, config: StateConfig) -> tuple[PendingAction, JsonValue]:
        """Record the action of the state being entered as pending (published after the save)."""
        action = config.action
        assert action is not None
        payload = self._action_payload(config)
        correlation_id = self._owner.correlation_id(self.plan_id, len(self._data.history))
        self._data.correlation_ids.append(correlation_id)
        human = is_human_action(config)
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
            sent_at=utc_now(),
        )
        self._data.current_action = pending
        return pending, payload

    async def _resumed(self) -> None:
        self._data.status = PlanStatus.RUNNING
        self._data.pause_reason = None
        self._dirty = True
        await self._record_status(PlanStatus.RUNNING)
        await announce_resumed(self._platform, self._data)

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
        await announce_paused(self._platform, self._data)
        await self._record_status(PlanStatus.PAUSED, reason)

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
        held = self._data.state.pop(HELD, None)
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
        info = as_error(error, kind="PlanFailed")
        await self._end(ActionResultData(success=False, error=info), PlanStatus.FAILED)

    async def _end(self, outcome: ActionResultData, status: PlanStatus) -> None:
        self._data.status = status
        self._data.pause_reason = None
        self._data.correlation_ids = []
        self._data.current_action = None
        self._data.state.pop(HELD, None)
        self._data.outcome = outcome
        self._data.outcome_sent = False
        self._data.finished_by = current_cause()
        await self._store()
        crash_point(CrashPoint.PLAN_FINISHED)
        await self._publish_end()

    async def _publish_end(self) -> None:
        """Answer the goal and announce the end (ids derived: repeatable), then note it was sent."""
        data = self._data
        outcome = data.outcome
        assert outcome is not None
        await answer_goal(self._platform, data)
        await self._record_status(
            data.status, outcome.error.message[:1000] if outcome.error else None
        )
        await announce_end(self._platform, data)
        # Noted so that a stale answer later does not publish it again; if this
        # write is lost, the worst case is one more (deduplicated) answer.
        data.outcome_sent = True
        try:
            await self._store()
        except Exception as exc:
            _log.info("plan end not noted as sent", plan_id=self.plan_id, error=repr(exc))


class TransitionContext(AnswerView):
    """An event that may move a plan: the answer to one of its actions (or a human's answer).

    ``success``/``result``/``error`` read an :class:`ActionResultData` answer; a
    human's answer reads as ``result`` = the answer (``success`` false when it
    timed out). ``next_state`` is where the state machine would go.
    """

    def __init__(self, envelope: Envelope, plan: PlanContext, topic: str) -> None:
        super().__init__(
            envelope,
            from_human=topic == Topic.NOTIFICATION_EVENTS.value,
            timeout_message="nobody answered in time",
        )
        self.plan = plan
        self.topic = topic

    @property
    def correlation_id(self) -> str | None:
        """The id of the action this answers."""
        return self.envelope.correlation_id

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
