"""A goal to achieve: :class:`GoalContext`, the request that starts a plan."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import JsonValue

from disco.agents._common import derived_id
from disco.agents._durable import as_error, utc_now
from disco.agents._errors import PlanError
from disco.agents._handlers import to_json
from disco.agents._plan import PlanContext, PlanOwner
from disco.agents._plan_machine import States, plan_definition
from disco_common.a2a import A2AMessageContext
from disco_common.envelope import ActionRequest
from disco_common.plans import PlanContextData
from disco_common.tasks import ActionResultData, ErrorInfo

if TYPE_CHECKING:
    from disco.agents._platform import PlatformContext

__all__ = ["GoalContext", "GoalOwner"]

InputT = TypeVar("InputT")


@dataclass(frozen=True, slots=True)
class GoalOwner:
    """What a :class:`GoalContext` needs of the Planner the goal came to.

    Attributes:
        name: the Planner's name (its plans' ``agent_name``).
        agent_id: the Planner's agent id (its plans' ``agent_id``).
        plan_type_version: the version the Planner runs a plan type as.
        plans: what the plan started for the goal needs of the Planner.
    """

    name: str
    agent_id: str
    plan_type_version: Callable[[str | None], str | None]
    plans: PlanOwner


class GoalContext(Generic[InputT]):
    """A goal to achieve: the request that starts a plan.

    ``start_plan`` runs a state machine for it; ``complete``/``fail`` answer it
    directly (a goal needs no plan when the answer is at hand).
    """

    def __init__(
        self, envelope: ActionRequest, platform: PlatformContext, owner: GoalOwner, input: InputT
    ) -> None:
        self.envelope = envelope
        self.input: InputT = input
        self._platform = platform
        self._owner = owner
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
    def a2a(self) -> A2AMessageContext | None:
        """The A2A message the goal's request came from (None: not from an A2A caller)."""
        return A2AMessageContext.of(self.envelope.extensions)

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
        definition = plan_definition(states, initial_state, plan_type)
        chosen_type = plan_type or (
            definition.plan_type if definition.plan_type != "plan" else None
        )
        request = self.envelope
        goal_data: dict[str, JsonValue] = (
            request.data if isinstance(request.data, dict) else {"value": request.data}
        )
        created = utc_now()
        data = PlanContextData(
            plan_id=derived_id(request.id, "plan"),
            plan_type=chosen_type,
            plan_type_version=self._owner.plan_type_version(chosen_type),
            goal_event=request.type,
            goal_data=goal_data,
            response_event=request.response_event,
            response_topic=request.response_topic,
            goal_correlation_id=request.correlation_id or request.id,
            goal_request_id=request.id,
            goal_task_id=request.task_id or request.id,
            initial_state=definition.initial_state,
            state_machine=dict(definition.states),
            state=dict(state or {}),
            parent_plan_id=request.plan_id,
            session_id=request.session_id,
            tenant_id=request.tenant_id,
            user_id=request.user_id,
            agent_id=self._owner.agent_id,
            agent_name=self._owner.name,
            traceparent=request.traceparent,
            created_at=created,
            updated_at=created,
        )
        plan = PlanContext(data, self._platform, self._owner.plans)
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
        info = as_error(error, kind="GoalFailed")
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
            task_id=request.task_id or request.id,
        )
