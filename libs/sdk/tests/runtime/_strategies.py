"""Hypothesis strategies for agent states (every field, every kind of value)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from disco.runtime import (
    AgentState,
    AgentStatus,
    AgentStep,
    ApprovalDecision,
    ApprovalWait,
    CompletionOptions,
    ContinuationEvaluation,
    ContinuationOutcome,
    Decision,
    ExecutionTiming,
    InFlightStep,
    Message,
    ReasoningEffort,
    Role,
    StepType,
    ToolCall,
    Usage,
)

text = st.text(max_size=40)
names = st.text(min_size=1, max_size=30)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
seconds = st.floats(min_value=0, max_value=1e7, allow_nan=False)
counts = st.integers(min_value=0, max_value=10**9)
times = st.datetimes(
    min_value=datetime(1970, 1, 2),
    max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone.min]),
)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | finite | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
metadata = st.dictionaries(text, json_values, max_size=3)

usages = st.builds(Usage, prompt_tokens=counts, completion_tokens=counts, total_tokens=counts)
options = st.builds(
    CompletionOptions,
    temperature=st.none() | st.floats(0, 2),
    top_p=st.none() | st.floats(0, 1),
    max_tokens=st.none() | st.integers(1, 10**6),
    presence_penalty=st.none() | st.floats(-2, 2),
    frequency_penalty=st.none() | st.floats(-2, 2),
    reasoning_effort=st.none() | st.sampled_from(ReasoningEffort),
    budget_tokens=st.none() | st.integers(1, 10**6),
)
tool_calls = st.builds(ToolCall, id=st.text(min_size=1, max_size=40), name=names, arguments=text)
messages = st.builds(
    Message,
    role=st.sampled_from(Role),
    content=text,
    tool_calls=st.lists(tool_calls, max_size=2).map(tuple),
    tool_call_id=st.none() | names,
    name=st.none() | names,
    metadata=metadata,
)
steps = st.builds(
    AgentStep,
    number=st.integers(1, 1000),
    type=st.sampled_from(StepType),
    finish_reason=st.none() | names,
    content=text,
    tool_calls=st.lists(tool_calls, max_size=2).map(tuple),
    errors=st.lists(text, max_size=2).map(tuple),
    usage=usages,
    started_at=times,
    ended_at=st.none() | times,
    duration_ms=seconds,
)
decisions = st.builds(
    ApprovalDecision,
    approved=st.booleans(),
    reason=st.none() | text,
    decided_by=st.none() | names,
    decided_at=times,
)
in_flight = st.builds(
    InFlightStep,
    number=st.integers(1, 1000),
    started_at=times,
    finish_reason=st.none() | names,
    content=text,
    tool_calls=st.lists(tool_calls, max_size=3).map(tuple),
    remaining=st.lists(names, max_size=3).map(tuple),
    errors=st.lists(text, max_size=2).map(tuple),
    usage=usages,
    seconds=seconds,
    decisions=st.dictionaries(names, decisions, max_size=2),
)
approvals = st.builds(
    ApprovalWait,
    tool_call_id=names,
    tool_name=names,
    arguments=json_values,
    requested_at=times,
    timeout_seconds=st.none() | st.integers(1, 86_400),
    deadline=st.none() | times,
    host=metadata,
)
evaluations = st.builds(
    ContinuationEvaluation,
    criterion=names,
    decision=st.sampled_from(Decision),
    reason=text,
    stop_reason=st.none() | names,
)
outcomes = st.builds(
    ContinuationOutcome,
    step_number=st.integers(0, 1000),
    should_continue=st.booleans(),
    stop_reason=st.none() | names,
    resolved_by=st.none() | names,
    evaluations=st.lists(evaluations, max_size=3).map(tuple),
)
timings = st.builds(
    ExecutionTiming,
    started_at=times,
    updated_at=times,
    cumulative_seconds=seconds,
    execution_seconds=seconds,
)
states = st.builds(
    AgentState,
    agent_id=st.text(min_size=1, max_size=60),
    parent_agent_id=st.none() | names,
    session_id=st.text(min_size=1, max_size=60),
    execution_id=names,
    status=st.sampled_from(AgentStatus),
    error=st.none() | text,
    system_prompt=text,
    summary=st.none() | text,
    messages=st.lists(messages, max_size=4).map(tuple),
    execution_buffer=st.lists(messages, max_size=3).map(tuple),
    steps=st.lists(steps, max_size=3).map(tuple),
    in_flight=st.none() | in_flight,
    approval=st.none() | approvals,
    usage=usages,
    execution=timings,
    options=options,
    last_continuation=st.none() | outcomes,
    metadata=metadata,
)
