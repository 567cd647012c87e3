"""Registering a Planner's plan types with the tracker, in the background.

A Planner tells the tracker the state machines it runs (``POST
/v1/tracker/plan-types``), so that a plan's view can show its machine. The
tracker is for observation: when it is down or slow, the Planner starts and
works all the same — registration is retried with backoff until it
succeeds or the Planner stops. A version already registered with another
definition (409) is not retried: the log says to register a new version.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from disco.clients import (
    ServiceConflictError,
    ServiceError,
    ServiceUnavailableError,
    TrackerClient,
)
from disco_common.plans import PlanDefinition

__all__ = ["DeclaredPlanType", "PlanTypeRegistrar"]

_log = structlog.get_logger("disco.agents")

_FIRST_RETRY_SECONDS = 0.5
_MAX_RETRY_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class DeclaredPlanType:
    """A plan type a Planner runs, and the version it runs it as."""

    definition: PlanDefinition
    version: str


class PlanTypeRegistrar:
    """Registers plan types with the tracker until each is registered (or refused)."""

    def __init__(self, tracker: TrackerClient, plan_types: Sequence[DeclaredPlanType]) -> None:
        self._tracker = tracker
        self._pending = list(plan_types)
        self._task: asyncio.Task[None] | None = None
        self.done = asyncio.Event()
        """Set once every plan type was registered or refused."""

    def start(self) -> None:
        """Start registering in the background (returns at once)."""
        if self._task is None and self._pending:
            self._task = asyncio.create_task(self._run(), name="disco-plan-types")
        elif not self._pending:
            self.done.set()

    async def stop(self) -> None:
        """Stop trying (idempotent)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        delay = _FIRST_RETRY_SECONDS
        while self._pending:
            declared = self._pending[0]
            plan_type = declared.definition.plan_type
            try:
                await self._tracker.register_plan_type(
                    declared.definition, version=declared.version
                )
            except ServiceConflictError as exc:
                _log.error(
                    "plan type version already registered with another definition; register "
                    "the changed plan as a new version (add_plan(..., version=...) or the "
                    "planner's version)",
                    plan_type=plan_type,
                    version=declared.version,
                    error=exc.message,
                )
            except (ServiceUnavailableError, ServiceError, OSError) as exc:
                if isinstance(exc, ServiceError) and not _worth_retrying(exc):
                    _log.error(
                        "plan type refused by the tracker",
                        plan_type=plan_type,
                        version=declared.version,
                        error=str(exc),
                    )
                else:
                    _log.warning(
                        "plan type not registered yet; retrying",
                        plan_type=plan_type,
                        retry_in_seconds=delay,
                        error=str(exc),
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _MAX_RETRY_SECONDS)
                    continue
            else:
                _log.info("plan type registered", plan_type=plan_type, version=declared.version)
            self._pending.pop(0)
            delay = _FIRST_RETRY_SECONDS
        self.done.set()


def _worth_retrying(exc: ServiceError) -> bool:
    # Unreachable, not ready, or a server error: later may work. A refusal of the
    # request itself (400/401/403/422) will not change by waiting.
    return isinstance(exc, ServiceUnavailableError) or exc.status >= 500
