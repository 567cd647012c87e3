"""Tool-call approvals: the wait a call gets, how a host makes it reachable, a denial.

A call whose tool asks for approval ends the run with an :class:`ApprovalWait`
in the state (saved durably first); the host's :class:`ApprovalChannel` makes
it reachable, and :meth:`AgentRunner.decide` records the decision the run then
goes on with. A denied call never runs: the model reads why instead.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any, Protocol

from disco.runtime._messages import ToolCall
from disco.runtime._state import AgentState, ApprovalDecision, ApprovalWait
from disco.runtime._tools import AgentTool
from disco_common.ids import utcnow

__all__ = ["ApprovalChannel", "NoPendingApprovalError", "approval_wait", "denied_text"]


class NoPendingApprovalError(LookupError):
    """A decision for a tool call the state does not wait for (a late or repeated decision)."""


class ApprovalChannel(Protocol):
    """How a host lets people know that a tool call waits for approval.

    :meth:`open` is called once the waiting state is saved, before the
    ``TOOL_APPROVAL_REQUESTED`` event is emitted: a decision can only come
    once the request is known, and then the state it resumes is saved.
    """

    async def open(self, state: AgentState) -> None:
        """``state.approval`` waits for a decision: make it reachable."""
        ...


def approval_wait(
    call: ToolCall, state: AgentState, tool: AgentTool | None, timeout_seconds: int
) -> ApprovalWait:
    """What ``call`` (of ``tool``, None when unknown) waits with: the state's wait, or a new one."""
    existing = state.approval
    if existing is not None and existing.tool_call_id == call.id:
        return existing
    shown: Any = None
    if tool is not None:
        with contextlib.suppress(ValueError):
            shown = tool.shown_arguments(tool.validate(call.parsed_arguments()).model_dump())
    now = utcnow()
    return ApprovalWait(
        tool_call_id=call.id,
        tool_name=call.name,
        arguments=shown,
        requested_at=now,
        timeout_seconds=timeout_seconds,
        deadline=now + timedelta(seconds=timeout_seconds),
    )


def denied_text(decision: ApprovalDecision) -> str:
    """What the model reads instead of the result of a call that was denied."""
    who = f" by {decision.decided_by}" if decision.decided_by else ""
    why = f": {decision.reason}" if decision.reason else ""
    return (
        f"The call was denied{who}{why}. It did not run. Do not call it again unless the user "
        "asks you to; tell the user instead."
    )
