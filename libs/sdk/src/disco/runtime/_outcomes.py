"""What continuation criteria decide: a verdict, a stop reason, and the outcome of a step
(recorded on the :class:`~disco.runtime.AgentState`, judged by
:mod:`disco.runtime._continuation`'s criteria)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ContinuationEvaluation", "ContinuationOutcome", "Decision", "StopReason"]


class Decision(StrEnum):
    """A criterion's verdict."""

    ALLOW = "allow"
    REQUEST = "request"
    FORBID = "forbid"


class StopReason(StrEnum):
    """Why a loop stopped (``ContinuationOutcome.stop_reason``); user criteria may add their own."""

    COMPLETED = "completed"
    STEPS_LIMIT = "steps_limit"
    TOKEN_BUDGET = "token_budget"  # noqa: S105 - a stop reason, not a secret
    TIME_LIMIT = "time_limit"
    FINISH_REASON = "finish_reason"
    ERROR_LIMIT = "error_limit"
    USER_CRITERION = "user_criterion"
    AWAITING_APPROVAL = "awaiting_approval"
    FAILED = "failed"


class ContinuationEvaluation(BaseModel):
    """One criterion's verdict after one step."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    criterion: str
    decision: Decision
    reason: str = ""
    stop_reason: str | None = None


class ContinuationOutcome(BaseModel):
    """What the criteria decided after a step, with every evaluation."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    step_number: int = Field(ge=0)
    should_continue: bool
    stop_reason: str | None = None
    resolved_by: str | None = None
    evaluations: tuple[ContinuationEvaluation, ...] = ()
