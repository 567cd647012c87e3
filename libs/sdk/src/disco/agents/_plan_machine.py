"""A plan's state machine: checking a definition before any plan runs it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from disco.agents._errors import PlanError
from disco.conditions import ConditionError, check_condition
from disco_common.notifications import NotificationType
from disco_common.plans import PlanDefinition, StateConfig, check_state_machine
from disco_common.topics import Topic

__all__ = ["States", "check_conditions", "is_human_action", "plan_definition"]

States = PlanDefinition | Mapping[str, StateConfig] | Sequence[StateConfig]
"""A plan's states: a :class:`PlanDefinition`, states by name, or a list of states."""


def check_conditions(config: StateConfig) -> None:
    """Check the CEL condition of each of ``config``'s transitions.

    Raises:
        PlanError: a condition is not valid (the message names the state and transition).
    """
    for transition in config.transitions:
        if transition.condition is not None:
            try:
                check_condition(transition.condition)
            except ConditionError as exc:
                raise PlanError(
                    f"state {config.state_name!r}, transition on {transition.on_event!r}: {exc}"
                ) from None


def plan_definition(
    states: States, initial_state: str | None, plan_type: str | None
) -> PlanDefinition:
    """``states`` as a checked :class:`PlanDefinition` (structure and conditions).

    Raises:
        PlanError: the state machine or a condition is not valid.
    """
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
                states=listed,
            )
        except ValidationError as exc:
            raise PlanError(f"the plan's state machine is not valid: {exc}") from None
    for config in definition.states.values():
        check_conditions(config)
    return definition


def is_human_action(config: StateConfig) -> bool:
    """Whether ``config``'s action asks a human (on ``notification-events``)."""
    return config.action is not None and (
        config.action.topic == Topic.NOTIFICATION_EVENTS.value
        or config.action.event_type == NotificationType.HUMAN_INPUT.value
    )
