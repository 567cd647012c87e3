"""Continuation criteria: after every step, should the loop go on? Each verdict is recorded.

Every criterion returns a :class:`Decision` with a reason:

- ``forbid``: stop now (a limit was reached); the first forbidding criterion
  resolves the outcome;
- ``request``: go on (there is work left: the model asked for tools);
- ``allow``: no objection, no request.

The loop goes on only when nothing forbids and something requests. When
nothing does either, it stops and the outcome is resolved by the first
criterion that named a stop reason (``ToolCallPresence`` says ``completed``
when the model answered without tools).
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

from disco.runtime._outcomes import (
    ContinuationEvaluation,
    ContinuationOutcome,
    Decision,
    StopReason,
)
from disco.runtime._state import AgentState

__all__ = [
    "ContinuationCriteria",
    "ContinuationEvaluation",
    "ContinuationOutcome",
    "Criterion",
    "CriterionResult",
    "Decision",
    "ErrorLimit",
    "FinishReason",
    "StepsLimit",
    "StopReason",
    "TimeLimit",
    "TokenBudget",
    "ToolCallPresence",
]


@dataclass(frozen=True, slots=True)
class CriterionResult:
    """What :meth:`Criterion.evaluate` returns."""

    decision: Decision
    reason: str = ""
    stop_reason: str | None = None


@runtime_checkable
class Criterion(Protocol):
    """Decides, from the state after a step, whether the loop may or should go on."""

    @property
    def name(self) -> str:
        """How evaluations name it (its class name by default)."""
        ...

    def evaluate(self, state: AgentState) -> CriterionResult:
        """The verdict for ``state`` (its last step just ended)."""
        ...


class _Named:
    @property
    def name(self) -> str:
        return type(self).__name__


class _CountLimit(_Named, ABC):
    """Forbid going on once a count over the execution's steps reaches ``maximum``."""

    _what: ClassVar[str]
    _stop: ClassVar[StopReason]

    def __init__(self, maximum: int, argument: str) -> None:
        if maximum < 1:
            raise ValueError(f"{type(self).__name__} needs {argument} >= 1, got {maximum}")
        self.maximum = maximum

    @abstractmethod
    def _count(self, state: AgentState) -> int:
        """The count this limit compares with ``maximum``."""

    def evaluate(self, state: AgentState) -> CriterionResult:
        count = self._count(state)
        if count >= self.maximum:
            return CriterionResult(
                Decision.FORBID, f"{count} {self._what}, limit {self.maximum}", self._stop
            )
        return CriterionResult(Decision.ALLOW, f"{count} of at most {self.maximum} {self._what}")


class StepsLimit(_CountLimit):
    """Forbid going on once ``max_steps`` steps of the execution ran."""

    _what = "step(s)"
    _stop = StopReason.STEPS_LIMIT

    def __init__(self, max_steps: int) -> None:
        super().__init__(max_steps, "max_steps")
        self.max_steps = max_steps

    def _count(self, state: AgentState) -> int:
        return len(state.steps)


class TokenBudget(_CountLimit):
    """Forbid going on once the execution's steps used ``max_tokens`` tokens in total."""

    _what = "token(s)"
    _stop = StopReason.TOKEN_BUDGET

    def __init__(self, max_tokens: int) -> None:
        super().__init__(max_tokens, "max_tokens")
        self.max_tokens = max_tokens

    def _count(self, state: AgentState) -> int:
        return sum(step.usage.total_tokens for step in state.steps)


class TimeLimit(_Named):
    """Forbid going on once the execution ran ``max_seconds`` (cumulative).

    The time counted is the execution's running time summed over its runs:
    waiting for an approval, a pause or a restart does not count, and the
    count survives them (it is part of the state and its snapshots). With
    ``whole_session=True`` the session's cumulative running time is counted.
    """

    def __init__(self, max_seconds: float, *, whole_session: bool = False) -> None:
        if not max_seconds > 0:
            raise ValueError(f"TimeLimit needs max_seconds > 0, got {max_seconds}")
        self.max_seconds = max_seconds
        self.whole_session = whole_session

    def evaluate(self, state: AgentState) -> CriterionResult:
        timing = state.execution
        spent = timing.cumulative_seconds if self.whole_session else timing.execution_seconds
        if spent >= self.max_seconds:
            return CriterionResult(
                Decision.FORBID,
                f"{spent:.3f}s spent, limit {self.max_seconds:g}s",
                StopReason.TIME_LIMIT,
            )
        return CriterionResult(Decision.ALLOW, f"{spent:.3f}s of {self.max_seconds:g}s spent")


class ToolCallPresence(_Named):
    """Request another step when the last one called tools; otherwise the work is done."""

    def evaluate(self, state: AgentState) -> CriterionResult:
        step = state.steps[-1] if state.steps else None
        if step is not None and step.tool_calls:
            return CriterionResult(
                Decision.REQUEST,
                f"{len(step.tool_calls)} tool call(s): the model needs the results",
            )
        return CriterionResult(
            Decision.ALLOW, "no tool calls: the model answered", StopReason.COMPLETED
        )


class FinishReason(_Named):
    """Forbid going on when the last step finished for one of ``stop_on`` reasons.

    By default ``length`` (the answer was cut at ``max_tokens``),
    ``content_filter`` and ``error``.
    """

    def __init__(self, stop_on: Iterable[str] = ("length", "content_filter", "error")) -> None:
        self.stop_on = frozenset(stop_on)

    def evaluate(self, state: AgentState) -> CriterionResult:
        step = state.steps[-1] if state.steps else None
        reason = step.finish_reason if step is not None else None
        if reason is not None and reason in self.stop_on:
            return CriterionResult(
                Decision.FORBID, f"the model stopped with {reason!r}", StopReason.FINISH_REASON
            )
        return CriterionResult(Decision.ALLOW, f"finish reason {reason!r}")


class ErrorLimit(_CountLimit):
    """Forbid going on once the execution's steps had ``max_errors`` errors.

    Errors are tool failures, invalid tool arguments, unknown tools and
    failed steps.
    """

    _what = "error(s)"
    _stop = StopReason.ERROR_LIMIT

    def __init__(self, max_errors: int) -> None:
        super().__init__(max_errors, "max_errors")
        self.max_errors = max_errors

    def _count(self, state: AgentState) -> int:
        return sum(len(step.errors) for step in state.steps)


UserCriterion = Callable[["AgentState"], "CriterionResult | Decision | bool | tuple[Decision, str]"]
"""A plain function as a criterion: ``True`` allows, ``False`` forbids, or a decision."""


class _FunctionCriterion:
    def __init__(self, function: UserCriterion, name: str | None = None) -> None:
        if inspect.iscoroutinefunction(function):
            raise TypeError(
                f"criterion {function!r} is async: continuation criteria are plain functions of "
                "the state (they run after every step and must not do I/O)"
            )
        self._function = function
        self._name: str = name or str(getattr(function, "__name__", type(function).__name__))

    @property
    def name(self) -> str:
        return self._name

    def evaluate(self, state: AgentState) -> CriterionResult:
        verdict = self._function(state)
        if isinstance(verdict, CriterionResult):
            return verdict
        if isinstance(verdict, bool):
            if verdict:
                return CriterionResult(Decision.ALLOW, f"{self._name} allows")
            return CriterionResult(
                Decision.FORBID, f"{self._name} forbids", StopReason.USER_CRITERION
            )
        if isinstance(verdict, Decision):
            stop = StopReason.USER_CRITERION if verdict is Decision.FORBID else None
            return CriterionResult(verdict, f"{self._name}: {verdict.value}", stop)
        if isinstance(verdict, tuple) and len(verdict) == 2:
            decision, reason = Decision(verdict[0]), str(verdict[1])
            stop = StopReason.USER_CRITERION if decision is Decision.FORBID else None
            return CriterionResult(decision, reason, stop)
        raise TypeError(
            f"criterion {self._name!r} returned {verdict!r}: return a bool, a Decision, a "
            "(Decision, reason) pair or a CriterionResult"
        )


class ContinuationCriteria:
    """Criteria evaluated together after every step.

    ``ToolCallPresence`` is always among them (added first when not given): it
    is what makes the loop go on after tool calls. Plain functions of the
    state are accepted as user criteria.

    Raises:
        TypeError: an item is neither a criterion nor a function.
    """

    def __init__(self, criteria: Sequence[Criterion | UserCriterion] = ()) -> None:
        converted: list[Criterion] = []
        for item in criteria:
            if isinstance(item, Criterion):
                converted.append(item)
            elif callable(item):
                converted.append(_FunctionCriterion(item))
            else:
                raise TypeError(
                    f"{item!r} is not a continuation criterion: give StepsLimit(...), "
                    "TokenBudget(...), TimeLimit(...), ToolCallPresence(), FinishReason(), "
                    "ErrorLimit(...) or a function of the state"
                )
        if not any(isinstance(item, ToolCallPresence) for item in converted):
            converted.insert(0, ToolCallPresence())
        self.criteria: tuple[Criterion, ...] = tuple(converted)

    def evaluate(self, state: AgentState) -> ContinuationOutcome:
        """Every criterion's verdict on ``state`` and what they decide together."""
        evaluations: list[ContinuationEvaluation] = []
        for criterion in self.criteria:
            try:
                result = criterion.evaluate(state)
            except Exception as exc:  # a broken user criterion stops the loop, with its error
                result = CriterionResult(
                    Decision.FORBID,
                    f"the criterion raised {type(exc).__name__}: {exc}",
                    StopReason.USER_CRITERION,
                )
            evaluations.append(
                ContinuationEvaluation(
                    criterion=criterion.name,
                    decision=result.decision,
                    reason=result.reason,
                    stop_reason=result.stop_reason,
                )
            )
        step_number = len(state.steps)
        forbidding = next((e for e in evaluations if e.decision is Decision.FORBID), None)
        if forbidding is not None:
            return ContinuationOutcome(
                step_number=step_number,
                should_continue=False,
                stop_reason=forbidding.stop_reason or StopReason.USER_CRITERION,
                resolved_by=forbidding.criterion,
                evaluations=tuple(evaluations),
            )
        requesting = next((e for e in evaluations if e.decision is Decision.REQUEST), None)
        if requesting is not None:
            return ContinuationOutcome(
                step_number=step_number,
                should_continue=True,
                stop_reason=None,
                resolved_by=requesting.criterion,
                evaluations=tuple(evaluations),
            )
        stopping = next((e for e in evaluations if e.stop_reason is not None), None)
        return ContinuationOutcome(
            step_number=step_number,
            should_continue=False,
            stop_reason=stopping.stop_reason if stopping else StopReason.COMPLETED,
            resolved_by=stopping.criterion if stopping else None,
            evaluations=tuple(evaluations),
        )
