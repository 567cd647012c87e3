"""Errors of the agent layers."""

from __future__ import annotations

__all__ = [
    "AgentDefinitionError",
    "AgentError",
    "HandlerSignatureError",
    "PlanConflictError",
    "PlanError",
    "StaleResultError",
    "StateConflictError",
    "TaskConflictError",
    "TaskStateError",
]


class AgentError(Exception):
    """Base of the agent layers' errors."""


class AgentDefinitionError(AgentError, ValueError):
    """An agent is declared wrongly (raised when the decorator or constructor runs).

    The message names the mistake and the fix.
    """


class HandlerSignatureError(AgentDefinitionError, TypeError):
    """A handler's signature does not fit its decorator."""


class TaskStateError(AgentError):
    """A task context was used in a way its state does not allow (e.g. completed twice)."""


class StateConflictError(AgentError):
    """Another instance changed a saved context since it was read (optimistic concurrency).

    The base of :class:`TaskConflictError` and :class:`PlanConflictError`: catch
    it to handle either. ``key`` names the task or plan, ``expected_version``
    the version this copy was based on (``0``: it was new).
    """

    kind = "context"

    def __init__(self, key: str, expected_version: int) -> None:
        super().__init__(
            f"{self.kind} {key!r} was changed by another instance since version "
            f"{expected_version} was read"
        )
        self.key = key
        self.expected_version = expected_version


class TaskConflictError(StateConflictError):
    """Another instance changed the task context since it was read (optimistic concurrency).

    Inside ``on_task``/``on_result``/``on_human_input`` handlers the Worker re-runs
    the handler on a fresh copy of the task, so handlers normally never see it.
    """

    kind = "task"

    @property
    def task_id(self) -> str:
        """The task that conflicted."""
        return self.key


class PlanConflictError(StateConflictError):
    """Another instance changed the plan context since it was read (optimistic concurrency).

    When an answer moves a plan, the Planner re-runs the step on a fresh copy, so
    ``on_transition`` handlers normally never see it.
    """

    kind = "plan"

    @property
    def plan_id(self) -> str:
        """The plan that conflicted."""
        return self.key


class StaleResultError(AgentError):
    """A result no longer moves its task: a duplicate, or the task is over or unknown.

    :meth:`ResultContext.restore_task` raises it; the Worker ends the handler
    quietly when it escapes, so a late or duplicated answer is harmless.
    """


class PlanError(AgentError):
    """A plan cannot go on: an unknown state, a bad template, a plan that is over."""
