"""Plans: the Planner's event-driven state machine and its persisted PlanContext.

A plan is a set of named states. Entering a state may run an action (publish a
request); the events that come back move the plan along the state's
transitions (the first transition whose ``on_event`` matches and whose
``condition``, if any, holds); ``default_next`` moves on unconditionally. A plan
ends in a terminal state. :class:`PlanDefinition` checks the graph's structure
when it is built, so a broken plan fails at registration, not mid-run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import Field, JsonValue, StringConstraints, field_validator, model_validator

from disco_common._base import Body, Description, Metadata
from disco_common.ids import (
    AgentName,
    EventType,
    Id,
    SemVer,
    TenantId,
    TopicName,
    TraceParent,
    UtcDatetime,
)
from disco_common.tasks import ActionResultData
from disco_common.topics import Topic

__all__ = [
    "CONDITION_MAX_CHARS",
    "MAX_PLAN_STATES",
    "PendingAction",
    "PlanContextData",
    "PlanDefinition",
    "PlanHistoryEntry",
    "PlanInstanceRequest",
    "PlanRegistrationRequest",
    "PlanStatus",
    "StateAction",
    "StateConfig",
    "StateName",
    "StateTransition",
    "check_state_machine",
]

MAX_PLAN_STATES = 500
CONDITION_MAX_CHARS = 1000

StateName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$"),
]
"""A state's name: letters, digits and ``_.:-``, at most 100 characters."""


class PlanStatus(StrEnum):
    """Where a plan stands."""

    PENDING = "pending"
    """Created, not started."""
    RUNNING = "running"
    """Moving through its states."""
    PAUSED = "paused"
    """Halted at a plan-level gate until an external event resumes it (no timeout)."""
    COMPLETED = "completed"
    """Reached a terminal state and answered the goal."""
    FAILED = "failed"
    """Ended with an error."""

    @property
    def is_final(self) -> bool:
        """Whether the plan is over."""
        return self in (PlanStatus.COMPLETED, PlanStatus.FAILED)


class StateAction(Body):
    """What to publish on entering a state."""

    event_type: EventType = Field(description="The request event type to publish.")
    response_event: EventType = Field(description="The event type the answer must come as.")
    topic: TopicName = Field(
        default=Topic.ACTION_REQUESTS.value,
        description=(
            "Where to publish: `action-requests` (default), or `notification-events` for a "
            "question to a human."
        ),
    )
    data: dict[str, JsonValue] | None = Field(
        default=None,
        description=(
            "The payload template; strings like `{goal_data.topic}` or `{results.search.count}` "
            "are filled in from the plan when the action runs."
        ),
    )


class StateTransition(Body):
    """Move to ``to_state`` when ``on_event`` arrives (and ``condition`` holds, if given)."""

    on_event: EventType = Field(description="The event type that triggers the transition.")
    to_state: StateName = Field(description="The state to move to.")
    condition: str | None = Field(
        default=None,
        min_length=1,
        max_length=CONDITION_MAX_CHARS,
        description=(
            "An expression over the triggering event's data and the plan (no code is "
            "executed); the transition applies only when it is true."
        ),
    )


class StateConfig(Body):
    """One state of a plan."""

    state_name: StateName = Field(description="The state's unique name.")
    description: Description = Field(default="", description="What happens in this state.")
    action: StateAction | None = Field(default=None, description="What to publish on entry.")
    transitions: list[StateTransition] = Field(
        default_factory=list,
        max_length=100,
        description="Event-driven ways out, tried in order.",
    )
    default_next: StateName | None = Field(
        default=None, description="Where to go unconditionally (no event needed)."
    )
    is_terminal: bool = Field(default=False, description="Whether the plan ends here.")
    is_failure: bool = Field(
        default=False,
        description=(
            "For a terminal state: the plan ends as failed here (the goal is answered with "
            "an error) rather than completed."
        ),
    )

    @model_validator(mode="after")
    def _terminal_is_final(self) -> Self:
        if self.is_terminal and (self.action or self.transitions or self.default_next):
            raise ValueError(
                f"terminal state {self.state_name!r} must not have an action, transitions "
                "or default_next: a plan ends in its terminal states"
            )
        if self.is_failure and not self.is_terminal:
            raise ValueError(
                f"state {self.state_name!r} has is_failure but is not terminal: only a "
                "terminal state can end a plan as failed"
            )
        return self

    @property
    def targets(self) -> list[str]:
        """Every state this one can move to."""
        found = [transition.to_state for transition in self.transitions]
        if self.default_next is not None:
            found.append(self.default_next)
        return found


def _states_by_name(value: Any) -> Any:
    # A list of states (as an LLM or a YAML file tends to write them) is accepted
    # and keyed by state_name; duplicates are an error rather than a silent overwrite.
    if not isinstance(value, list):
        return value
    keyed: dict[str, Any] = {}
    for item in value:
        name = (
            item.get("state_name")
            if isinstance(item, Mapping)
            else getattr(item, "state_name", None)
        )
        if not isinstance(name, str):
            raise ValueError("every state in a list of states needs a state_name")
        if name in keyed:
            raise ValueError(f"state {name!r} is defined twice")
        keyed[name] = item
    return keyed


def check_state_machine(initial_state: str, states: Mapping[str, StateConfig]) -> None:
    """Raise ValueError unless ``states`` forms a well-built plan starting at ``initial_state``.

    Rules: names match keys; the initial state exists; every target exists;
    every non-terminal state has a way out; a terminal state is reachable.
    """
    known = sorted(states)
    for key, config in states.items():
        if key != config.state_name:
            raise ValueError(f"states[{key!r}] is named {config.state_name!r}: keys must be names")
    if initial_state not in states:
        raise ValueError(f"initial_state {initial_state!r} is not a state; known states: {known}")
    for config in states.values():
        for target in config.targets:
            if target not in states:
                raise ValueError(
                    f"state {config.state_name!r} moves to unknown state {target!r}; "
                    f"known states: {known}"
                )
        if not config.is_terminal and not config.targets:
            raise ValueError(
                f"state {config.state_name!r} is not terminal but has no transitions or "
                "default_next: the plan would stop there forever"
            )
    seen = {initial_state}
    queue = deque([initial_state])
    while queue:
        config = states[queue.popleft()]
        if config.is_terminal:
            return
        for target in config.targets:
            if target not in seen:
                seen.add(target)
                queue.append(target)
    raise ValueError(f"no terminal state is reachable from {initial_state!r}")


class PlanDefinition(Body):
    """A plan type's state machine, checked for structure when built."""

    plan_type: EventType = Field(description="The plan type, e.g. `research.plan`.")
    description: Description = Field(default="", description="What the plan achieves.")
    initial_state: StateName = Field(default="start", description="Where a plan starts.")
    states: dict[StateName, StateConfig] = Field(
        min_length=1,
        max_length=MAX_PLAN_STATES,
        description="The states by name (a list of states is accepted and keyed by name).",
    )

    if TYPE_CHECKING:
        # What the constructor accepts, for type checkers: the states also as a
        # list (keyed by name when validated), which the dict field alone hides.
        def __init__(
            self,
            *,
            plan_type: str,
            states: Mapping[str, StateConfig] | Sequence[StateConfig],
            description: str = "",
            initial_state: str = "start",
        ) -> None: ...

    @field_validator("states", mode="before")
    @classmethod
    def _accept_state_list(cls, value: Any) -> Any:
        return _states_by_name(value)

    @model_validator(mode="after")
    def _check_structure(self) -> Self:
        check_state_machine(self.initial_state, self.states)
        return self

    @property
    def terminal_states(self) -> list[str]:
        """The names of the terminal states."""
        return [name for name, config in self.states.items() if config.is_terminal]


class PlanRegistrationRequest(Body):
    """Register a version of a plan type (its state machine) with the tracker.

    A version is immutable: registering the same content again is accepted
    (idempotent), other content under an existing version is refused (409).
    """

    plan: PlanDefinition
    version: SemVer = Field(
        default="1.0.0", description="The version of the plan type this definition is."
    )


class PlanInstanceRequest(Body):
    """Start an instance of a registered plan type."""

    plan_type: EventType = Field(description="The registered plan type.")
    goal_data: dict[str, JsonValue] = Field(
        default_factory=dict, description="The goal's data, available to action templates."
    )
    response_event: EventType | None = Field(
        default=None, description="The event type the final result is published as."
    )
    session_id: Id | None = Field(default=None, description="The conversation it belongs to.")
    parent_plan_id: Id | None = Field(default=None, description="The plan it is a sub-plan of.")


class PlanHistoryEntry(Body):
    """One transition a plan made."""

    from_state: StateName | None = Field(description="The state left (None when the plan started).")
    to_state: StateName = Field(description="The state entered.")
    event_type: EventType | None = Field(
        default=None, description="The event that triggered it (None for default_next or start)."
    )
    event_id: Id | None = Field(default=None, description="That event's envelope id.")
    at: UtcDatetime = Field(description="When it happened.")


class PendingAction(Body):
    """The current state's action as the plan published it, kept until it is answered.

    A plan is saved before its action is published; if the process dies in
    between, the action is published again from this record (the same envelope
    id and time, so receivers deduplicate it).
    """

    correlation_id: Id = Field(description="The correlation id the answer will carry.")
    request_id: Id = Field(description="The envelope id the action is published with.")
    state_name: StateName = Field(description="The state whose action it is.")
    topic: TopicName = Field(description="Where it is published.")
    event_type: EventType = Field(description="The published event type.")
    response_event: EventType = Field(description="The event type the answer comes as.")
    data: JsonValue = Field(
        default=None, description="The payload as published (when `data_kept`)."
    )
    data_kept: bool = Field(
        default=False,
        description=(
            "Whether `data` holds the payload; one too large to keep is rendered again from "
            "the state's template."
        ),
    )
    caused_by: Id | None = Field(
        default=None,
        description=(
            "The id of the envelope whose handling moved the plan into this state: when it "
            "comes again (a redelivery after a crash), the action is published again."
        ),
    )
    sent_at: UtcDatetime = Field(description="When it was (to be) published.")


class PlanContextData(Body):
    """The persisted form of a Planner's PlanContext (what the memory service stores).

    The state machine is stored state by state without the whole-graph check of
    :class:`PlanDefinition`, because a plan reasoned out by an LLM may grow its
    states while it runs.
    """

    plan_id: Id = Field(description="The plan's id.")
    plan_type: EventType | None = Field(
        default=None, description="The registered plan type, if any."
    )
    plan_type_version: SemVer | None = Field(
        default=None, description="The version of the plan type it runs, when registered."
    )
    goal_event: EventType = Field(description="The goal request's event type.")
    goal_data: dict[str, JsonValue] = Field(default_factory=dict, description="The goal's data.")
    response_event: EventType = Field(description="The event type the final result goes out as.")
    response_topic: TopicName = Field(
        default=Topic.ACTION_RESULTS.value, description="Where the final result goes."
    )
    goal_correlation_id: Id | None = Field(
        default=None, description="The goal request's correlation id, echoed on the final result."
    )
    goal_request_id: Id | None = Field(default=None, description="The goal request's envelope id.")
    goal_task_id: Id | None = Field(
        default=None,
        description="The goal request's task id (its `task_id`, else its envelope id).",
    )
    status: PlanStatus = Field(default=PlanStatus.PENDING)
    initial_state: StateName = Field(default="start")
    state_machine: dict[StateName, StateConfig] = Field(
        default_factory=dict, max_length=MAX_PLAN_STATES, description="The states by name."
    )
    current_state: StateName | None = Field(default=None, description="Where the plan is now.")
    results: dict[str, JsonValue] = Field(
        default_factory=dict, description="Results gathered so far, by step (or `final`)."
    )
    state: Metadata = Field(default_factory=dict, description="The planner's own state.")
    parent_plan_id: Id | None = Field(default=None, description="The plan this is a sub-plan of.")
    session_id: Id | None = Field(default=None, description="The conversation it belongs to.")
    tenant_id: TenantId | None = None
    user_id: Id | None = None
    agent_id: Id | None = Field(default=None, description="The planner instance that owns it.")
    agent_name: AgentName | None = Field(default=None, description="The planner that owns it.")
    correlation_ids: list[Id] = Field(
        default_factory=list,
        max_length=1000,
        description="Correlation ids of outstanding requests whose answers move this plan.",
    )
    pause_reason: str | None = Field(
        default=None, max_length=1000, description="Why the plan is paused."
    )
    history: list[PlanHistoryEntry] = Field(
        default_factory=list, max_length=10_000, description="Transitions made, oldest first."
    )
    current_action: PendingAction | None = Field(
        default=None,
        description="The current state's action as published, while it waits for its answer.",
    )
    outcome: ActionResultData | None = Field(
        default=None, description="The goal's answer once the plan is final."
    )
    outcome_sent: bool = Field(
        default=False,
        description=(
            "Whether the final answer was surely published (false between saving the end and "
            "publishing it: a redelivery then publishes it again)."
        ),
    )
    finished_by: Id | None = Field(
        default=None, description="The id of the envelope whose handling ended the plan."
    )
    traceparent: TraceParent | None = None
    created_at: UtcDatetime | None = None
    updated_at: UtcDatetime | None = None

    @field_validator("state_machine", mode="before")
    @classmethod
    def _accept_state_list(cls, value: Any) -> Any:
        return _states_by_name(value)

    @model_validator(mode="after")
    def _check_names(self) -> Self:
        for key, config in self.state_machine.items():
            if key != config.state_name:
                raise ValueError(
                    f"state_machine[{key!r}] is named {config.state_name!r}: keys must be names"
                )
        if (
            self.current_state is not None
            and self.state_machine
            and (self.current_state not in self.state_machine)
        ):
            raise ValueError(
                f"current_state {self.current_state!r} is not in the state machine; known "
                f"states: {sorted(self.state_machine)}"
            )
        return self
