"""A test seam: make an agent die between saving a context and publishing what it promised.

Workers and Planners save a task or plan context *before* publishing the
requests, questions and answers it records, and call :func:`crash_point` in
between; a journaled step (``disco.step``) calls it between its effect and its
record, and after its record. Nothing happens there in production. Tests use it
to prove that the recovery paths finish the work after a crash at exactly that
point:

- an agent **process** started with ``DISCO_TEST_CRASH_AFTER=<point>`` (or
  ``<point>@<n>``: the n-th time, or several separated by commas) exits at once
  with :data:`CRASH_EXIT_CODE` through ``os._exit`` — no cleanup, no offset
  commit, no leaving the group: what a SIGKILL leaves behind;
- :class:`disco.testing.AgentTestKit` arms a crash with ``kit.crash_after(point)``:
  the handler is cut off there and the kit redelivers its envelope, as the bus
  would after the group rebalanced.

The points are the values of :class:`CrashPoint`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from enum import StrEnum

__all__ = ["CRASH_ENV", "CRASH_EXIT_CODE", "CrashPoint", "crash_point", "set_crash_hook"]

CRASH_ENV = "DISCO_TEST_CRASH_AFTER"
CRASH_EXIT_CODE = 86
"""The exit code of a process that crashed on purpose at a crash point."""


class CrashPoint(StrEnum):
    """Where, between a save and the publishing it promised, a test may crash an agent."""

    TASK_DELEGATED = "task.delegated"
    """A task was saved with new sub-tasks; their requests are not published yet."""
    TASK_ASKED = "task.asked"
    """A task was saved waiting for a human; the question is not published yet."""
    TASK_FINISHED = "task.finished"
    """A task was saved as completed or failed; its answer is not published yet."""
    PLAN_ACTION = "plan.action"
    """A plan was saved in a state with an action; the action is not published yet."""
    PLAN_FINISHED = "plan.finished"
    """A plan was saved as completed or failed; the goal's answer is not published yet."""
    STEP_RAN = "step.ran"
    """A step's function returned (its effect is done); its result is not recorded yet."""
    STEP_RECORDED = "step.recorded"
    """A step's result was recorded; the handler has not gone on yet."""


CrashHook = Callable[[CrashPoint], None]

_hook: CrashHook | None = None
_reached: dict[str, int] = {}


def set_crash_hook(hook: CrashHook | None) -> None:
    """Install ``hook`` (called at every crash point; it raises to cut the handler off)."""
    global _hook
    _hook = hook


def _armed(point: CrashPoint) -> bool:
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return False
    count = _reached[point.value] = _reached.get(point.value, 0) + 1
    for item in spec.split(","):
        name, _, nth = item.strip().partition("@")
        if name == point.value and count == (int(nth) if nth else 1):
            return True
    return False


def crash_point(point: CrashPoint) -> None:
    """Mark a point between a save and its publishing (a no-op unless a test armed it)."""
    if _hook is not None:
        _hook(point)
    if _armed(point):
        sys.stderr.write(f"disco: crashing on purpose after {point.value} ({CRASH_ENV})\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
