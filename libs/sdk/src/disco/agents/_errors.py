"""Errors of the agent layers."""

from __future__ import annotations

__all__ = [
    "AgentDefinitionError",
    "AgentError",
    "HandlerSignatureError",
    "PlanError",
    "StaleResultError",
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


class TaskConflictError(AgentError):
    """Another instance changed the task context since it was read (optimistic concurrency).

    Inside ``on_task``/``on_result``/``on_human_input`` handlers the Worker re-runs
    the handler on a fresh copy of the task, so handlers normally never see it.
    """

    def __init__(self, task_id: str, expected_version: int) -> None:
        super().__init__(
            f"task {task_id!r} was changed by another instance since version "
            f"{expected_version} was read"
        )
        self.task_id = task_id
        self.expected_version = expected_version


class StaleResultError(AgentError):
    """A result no longer moves its task: a duplicate, or the task is over or unknown.

    :meth:`ResultContext.restore_task` raises it; the Worker ends the handler
    quietly when it escapes, so a late or duplicated answer is harmless.
    """


class PlanError(AgentError):
    """A plan cannot go on: an unknown state, a bad template, a plan that is over."""
