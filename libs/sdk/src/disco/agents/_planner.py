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

The goal is :class:`~disco.agents.GoalContext` (``_goal.py``), the plan
:class:`~disco.agents.PlanContext` (``_plan.py``, what it publishes in
``_plan_wire.py``), an answer :class:`~disco.agents.TransitionContext`
(``_plan.py`` too); the machinery shared with Workers is in ``_durable.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import structlog
from pydantic import ValidationError
from typing_extensions import Unpack

from disco._completion import LLMDriver
from disco._reasoning import next_step_from_llm, plan_from_llm
from disco.agents._agent import Agent
from disco.agents._common import derived_id
from disco.agents._durable import (
    FINISHER_GRACE,
    RESEND_GRACE,
    TRANSIENT,
    Recovery,
    ResendMemo,
    SavedCopies,
    current_cause,
    retry_on_conflict,
)
from disco.agents._errors import (
    AgentDefinitionError,
    AgentError,
    PlanConflictError,
    StateConflictError,
)
from disco.agents._goal import GoalContext, GoalOwner
from disco.agents._handlers import HandlerSpec, describe, inspect_handler
from disco.agents._options import AgentOptions
from disco.agents._plan import PlanContext, PlanOwner, TransitionContext
from disco.agents._plan_machine import is_human_action, plan_definition
from disco.agents._plan_types import DeclaredPlanType, PlanTypeRegistrar
from disco.agents._plan_wire import announce_again, send_action
from disco.bus import ANY_EVENT
from disco_common.envelope import ActionRequest, Envelope
from disco_common.notifications import NotificationType
from disco_common.plans import (
    PlanContextData,
    PlanDefinition,
    PlanRegistrationRequest,
    StateConfig,
)
from disco_common.topics import Topic

if TYPE_CHECKING:
    from disco.agents._platform import PlatformContext

__all__ = ["Planner"]


def _awaited_answers(data: PlanContextData) -> list[str]:
    return [] if data.status.is_final else list(data.correlation_ids)


_log = structlog.get_logger("disco.agents")

HandlerT = TypeVar("HandlerT", bound=Callable[..., Awaitable[Any]])


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
        name: the agent's name (letters, digits, ``._-``); also its consumer group.
        llm: an :class:`disco.llm.LLMDriver` for LLM reasoning (optional).
        **options: the options of every agent (:class:`~disco.agents.AgentOptions`).
    """

    kind = "planner"
    durable_dedup_default = True

    def __init__(
        self,
        name: str,
        *,
        llm: LLMDriver | None = None,
        **options: Unpack[AgentOptions],
    ) -> None:
        super().__init__(name, **options)
        self.llm = llm
        self._marker = derived_id("planner", name).replace("-", "")[:10]
        self._transition: HandlerSpec | None = None
        self._answer_routes = False
        # Answers the declared plans wait for, by (topic, event type). When every
        # goal runs a declared plan, the planner subscribes to exactly these;
        # a goal handler, on_transition or an LLM may make any plan, and then it
        # reads every answer type (still filtered by correlation id, unparsed
        # envelopes of other types are skipped by the bus).
        self._declared: set[tuple[str, str]] = set()
        self._dynamic = llm is not None
        self._adding_plan = False
        self._resent = ResendMemo()
        # The plans this process last saved, by the answers they wait for (see _load).
        self._copies: SavedCopies[PlanContextData] = SavedCopies(_awaited_answers)
        self._plans = PlanOwner(self._copies, self._correlation_id)
        self._plan_types: dict[str, DeclaredPlanType] = {}
        self._plan_type_registrar: PlanTypeRegistrar | None = None

    # -- ids -----------------------------------------------------------------------------

    def _correlation_id(self, plan_id: str, step: int) -> str:
        return f"plan.{self._marker}.{plan_id}.{step}"

    def _goal_owner(self) -> GoalOwner:
        return GoalOwner(self.name, self.identity.agent_id, self.plan_type_version, self._plans)

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
                    await GoalContext(request, platform, planner._goal_owner(), None).fail(exc)
                    return
                goal = GoalContext(request, platform, planner._goal_owner(), goal_input)
                await planner._run_goal(goal, spec, name)

            self._serve_requests(
                event_type,
                spec,
                dispatch,
                capability=capability,
                description=description,
                response_event=response_event,
            )
            return handler

        return register

    def declare_plan_type(
        self, definition: PlanDefinition, *, version: str | None = None
    ) -> PlanDefinition:
        """Declare a plan type this planner runs; it is registered with the tracker on start.

        The tracker then shows each plan of that type with its state machine.
        :meth:`add_plan` declares its plan itself; call this for plans a goal
        handler starts with ``goal.start_plan(definition, plan_type=...)``.

        Args:
            definition: the plan type's state machine.
            version: its version (default: the planner's ``version``). A version
                is immutable in the tracker: give a changed plan a new version.

        Returns:
            The definition, checked.

        Raises:
            PlanError: a condition is not valid.
            AgentDefinitionError: the plan type is declared twice with different versions
                or definitions, or ``version`` is not a semantic version.
        """
        checked = plan_definition(definition, None, None)
        chosen = version or self.version
        try:
            PlanRegistrationRequest(plan=checked, version=chosen)
        except ValueError as exc:
            raise AgentDefinitionError(
                f"plan type {checked.plan_type!r} version {chosen!r} is not valid: {exc}"
            ) from None
        declared = DeclaredPlanType(checked, chosen)
        existing = self._plan_types.get(checked.plan_type)
        if existing is not None and existing != declared:
            raise AgentDefinitionError(
                f"plan type {checked.plan_type!r} is declared twice, differently (version "
                f"{existing.version} and {chosen}): declare each plan type once"
            )
        self._plan_types[checked.plan_type] = declared
        return checked

    def plan_type_version(self, plan_type: str | None) -> str | None:
        """The version this planner runs ``plan_type`` as (None if it did not declare it)."""
        declared = self._plan_types.get(plan_type) if plan_type is not None else None
        return declared.version if declared is not None else None

    def add_plan(
        self,
        event_type: str,
        definition: PlanDefinition,
        *,
        capability: str | None = None,
        description: str | None = None,
        version: str | None = None,
    ) -> None:
        """Run ``definition`` for every ``event_type`` goal (no handler code needed).

        The plan type is declared too (:meth:`declare_plan_type`, as ``version``).

        Raises:
            PlanError: a condition is not valid.
        """
        checked = self.declare_plan_type(definition, version=version)

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
                    if is_human_action(config)
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
                    f"({describe(self._transition.func)})"
                )
            spec = inspect_handler(
                handler,
                decorator="on_transition",
                first="transition: TransitionContext",
                context_types=(TransitionContext,),
            )
            self._transition = spec
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

    # -- lifecycle -----------------------------------------------------------------------

    async def _on_starting(self, context: PlatformContext) -> None:
        await super()._on_starting(context)
        if context.tracker is not None and self._plan_types:
            # In the background: a tracker that is down must not keep the planner from working.
            registrar = PlanTypeRegistrar(context.tracker, list(self._plan_types.values()))
            self._plan_type_registrar = registrar
            registrar.start()

    async def _stop_parts(self, grace: float) -> None:
        registrar, self._plan_type_registrar = self._plan_type_registrar, None
        if registrar is not None:
            await registrar.stop()
        await super()._stop_parts(grace)

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

    async def _load(self, plan_id: str, *, answer: str | None = None) -> PlanContext | None:
        """The plan ``plan_id``; with ``answer`` (the correlation id of an answer to
        handle), the copy this process last saved when that copy waits for it
        (:class:`~disco.agents._durable.SavedCopies`): a copy that does not wait
        for ``answer`` is not trusted either way, the stored plan decides."""
        platform = self.context
        if answer is not None:
            taken = self._copies.take(answer)
            if taken is not None and taken[0] == plan_id:
                return PlanContext(taken[2], platform, self._plans, version=taken[1])
        record = await platform.context_memory.get_plan_context(plan_id)
        if record is None:
            return None
        return PlanContext(record.context, platform, self._plans, version=record.version)

    async def find_plan(self, correlation_id: str) -> PlanContext | None:
        """The plan waiting for ``correlation_id`` (its own actions' ids, or ids it registered)."""
        plan_id = self._plan_id_of(correlation_id)
        if plan_id is not None:
            return await self.restore_plan(plan_id)
        platform = self.context
        record = await platform.context_memory.get_plan_by_correlation(correlation_id)
        if record is None:
            return None
        plan = PlanContext(record.context, platform, self._plans, version=record.version)
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
        recovery = Recovery(self._resent, cause, by_age=by_age)
        if data.status.is_final:
            if data.outcome is None or data.outcome_sent:
                return 0
            if not recovery.due(data.plan_id, data.finished_by, data.updated_at, FINISHER_GRACE):
                return 0
            _log.info("answering a finished plan's goal again", plan_id=data.plan_id)
            await plan._publish_end()
            recovery.sent(data.plan_id)
            return 1
        pending = data.current_action
        if pending is None or pending.correlation_id not in data.correlation_ids:
            return 0
        if not recovery.due(
            pending.correlation_id, pending.caused_by, pending.sent_at, RESEND_GRACE
        ):
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
        await send_action(self.context, data, pending, payload)
        recovery.sent(pending.correlation_id)
        await announce_again(self.context, data, pending)
        return 1

    # -- running -------------------------------------------------------------------------

    async def _run_goal(self, goal: GoalContext[Any], handler: HandlerSpec, name: str) -> None:
        try:
            await handler.call(goal, self.context)
        except PlanConflictError:
            _log.info("goal already taken up (redelivered); skipping", goal=goal.envelope.id)
            plan = goal.plan
            if plan is not None and plan.version is None:
                # The goal came again: its first handling saved the plan and may
                # have died before publishing what it saved.
                stored = await self._load(plan.plan_id)
                if stored is not None:
                    await self._recover(stored, goal.envelope.id, by_age=False)
        except TRANSIENT:
            raise
        except Exception as exc:
            _log.warning("goal handler failed", handler=name, error=repr(exc))
            plan = goal.plan
            if plan is not None and plan.version is not None:
                if not plan.finished:
                    with contextlib.suppress(PlanConflictError):
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
        async def step() -> None:
            # Read afresh after a conflict (another instance moved it): the save
            # that lost forgot this process's copy.
            plan = await self._load(plan_id, answer=envelope.correlation_id)
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
                if self._transition is None:
                    await plan.execute_next(transition)
                else:
                    await self._transition.call(transition, self.context)
                if plan.dirty and not plan.finished:
                    if envelope.correlation_id in plan._data.correlation_ids:
                        plan._data.correlation_ids.remove(envelope.correlation_id)
                    await plan.save()
            except (StateConflictError, *TRANSIENT):
                raise
            except Exception as exc:
                _log.warning("plan step failed; failing the plan", plan_id=plan_id, error=repr(exc))
                if not plan.finished:
                    await plan.fail(exc)

        await retry_on_conflict(step)

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
