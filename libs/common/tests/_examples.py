"""Representative instances of disco_common's models: the shared values and the contracts'
examples (envelopes, registry, plans, tasks, system events, notifications).

``test_round_trip`` adds the memory and tracker examples and checks that every
exported model has one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from disco_common import (
    a2a,
    a2a_cards,
    asyncapi,
    auth,
    canonical,
    envelope,
    errors,
    memory,
    notifications,
    pagination,
    plans,
    registry,
    system_events,
    tasks,
    tracker,
)

T0 = datetime(2026, 1, 16, 10, 0, 0, 123456, tzinfo=UTC)
T1 = datetime(2026, 1, 16, 10, 5, 0, tzinfo=UTC)

REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"expression": {"type": "string", "description": "Math expression"}},
    "required": ["expression"],
}
RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"result": {"type": "number"}},
    "required": ["result"],
}

CONSUMED = registry.EventDefinition(
    event_type="calculate.requested",
    topic="action-requests",
    description="Request a calculation",
    json_schema=REQUEST_SCHEMA,
)
PRODUCED = registry.EventDefinition(
    event_type="calculate.completed",
    topic="action-results",
    description="Calculation result",
    schema_ref=registry.SchemaRef(name="calculate.result", version="1.2.0"),
)
CAPABILITY = registry.AgentCapability(
    task_name="calculate",
    description="Performs mathematical calculations",
    consumed_event=CONSUMED,
    produced_events=[PRODUCED],
)
AGENT_RECORD = registry.AgentRecord(
    agent_id="calculator-1",
    tenant_id="acme",
    name="calculator",
    version="1.0.0",
    description="Arithmetic",
    tags=["math"],
    instance_id="host-a:4242",
    visibility=registry.Visibility.PUBLIC,
    capabilities=[CAPABILITY],
    ttl_seconds=30,
    metadata={"team": "core"},
    status=registry.AgentStatus.LIVE,
    registered_at=T0,
    updated_at=T0,
    last_heartbeat_at=T1,
    expires_at=T1,
)
DISCOVERED_EVENT = registry.DiscoveredEvent(
    event_type="calculate.requested",
    topic="action-requests",
    json_schema=REQUEST_SCHEMA,
)
A2A_MESSAGE = a2a.A2AMessage(
    message_id="msg-1",
    role=a2a.A2ARole.USER,
    parts=[
        a2a.A2APart.from_text("What is the weather in Atlantis?"),
        a2a.A2APart.from_data({"city": "Atlantis"}),
        a2a.A2APart.from_file(b"%PDF-1.7", name="forecast.pdf", media_type="application/pdf"),
        a2a.A2APart.from_url("https://example.com/map.png", media_type="image/png"),
    ],
    context_id="ctx-1",
    metadata={"skill": "weather"},
)
A2A_ARTIFACT = a2a.A2AArtifact(
    artifact_id="art-1", name="forecast", parts=[a2a.A2APart.from_data({"sky": "clear"})]
)
A2A_CARD = a2a_cards.A2AAgentCard(
    name="calculator",
    description="Arithmetic",
    version="1.0.0",
    supported_interfaces=[
        a2a_cards.A2AAgentInterface(
            url="https://gw.example/a2a/calculator", protocol_binding="JSONRPC"
        )
    ],
    provider=a2a_cards.A2AAgentProvider(organization="acme", url="https://gw.example"),
    capabilities=a2a_cards.A2AAgentCapabilities(
        streaming=True,
        push_notifications=True,
        extensions=[a2a_cards.A2AAgentExtension(uri="urn:x", required=False, params={"a": 1})],
    ),
    default_input_modes=["application/json"],
    default_output_modes=["application/json"],
    skills=[
        a2a_cards.A2AAgentSkill(id="calculate", name="calculate", description="Adds", tags=["math"])
    ],
    security_schemes={
        "bearer": a2a_cards.A2ASecurityScheme(
            http_auth_security_scheme=a2a_cards.A2AHTTPAuthSecurityScheme(scheme="Bearer")
        )
    },
    security_requirements=[
        a2a_cards.A2ASecurityRequirement(schemes={"bearer": a2a_cards.A2AStringList()})
    ],
    signatures=[
        a2a_cards.A2AAgentCardSignature(protected="eyJhbGciOiJFUzI1NiJ9", signature="c2ln")
    ],
)

STATES = {
    "start": plans.StateConfig(state_name="start", description="begin", default_next="searching"),
    "searching": plans.StateConfig(
        state_name="searching",
        description="search the web",
        action=plans.StateAction(
            event_type="web.search.requested",
            response_event="web.search.completed",
            data={"query": "{goal_data.topic}"},
        ),
        transitions=[
            plans.StateTransition(on_event="web.search.completed", to_state="done"),
            plans.StateTransition(
                on_event="web.search.failed", to_state="failed", condition="data.retries > 2"
            ),
        ],
    ),
    "done": plans.StateConfig(state_name="done", description="finished", is_terminal=True),
    "failed": plans.StateConfig(state_name="failed", description="gave up", is_terminal=True),
}
PLAN_DEFINITION = plans.PlanDefinition(
    plan_type="research.plan", description="Research a topic", states=STATES
)
ERROR = tasks.ErrorInfo(type="ValueError", message="bad expression", details={"at": 3})
SUB_TASK = tasks.SubTaskInfo(
    sub_task_id="sub-1",
    event_type="sentiment.analyze",
    response_event="sentiment.completed",
    status=tasks.SubTaskStatus.COMPLETED,
    parallel_group_id="group-1",
    result={"score": 0.9},
    delegated_at=T0,
    finished_at=T1,
    caused_by="evt-1",
)
PENDING_SUB_TASK = tasks.SubTaskInfo(
    sub_task_id="sub-2",
    event_type="sentiment.analyze",
    response_event="sentiment.completed",
    delegated_at=T1,
    caused_by="evt-2",
    request_data={"text": "hello"},
    request_kept=True,
)
HUMAN_WAIT = tasks.HumanInputWait(
    request_id="q-1",
    correlation_id="task-1",
    response_event="document.approval.received",
    timeout_seconds=3600,
    asked_at=T0,
    caused_by="evt-1",
    request_data={"question": "Approve?", "response_event": "document.approval.received"},
)
PENDING_ACTION = plans.PendingAction(
    correlation_id="corr-2",
    request_id="req-2",
    state_name="searching",
    topic="action-requests",
    event_type="web.search.requested",
    response_event="web.search.completed",
    data={"query": "AI trends"},
    data_kept=True,
    caused_by="evt-2",
    sent_at=T1,
)
TASK_CONTEXT = tasks.TaskContextData(
    task_id="task-1",
    event_type="analyze.requested",
    plan_id="plan-1",
    data={"text": "hello"},
    response_event="analyze.completed",
    correlation_id="corr-1",
    request_id="evt-1",
    sub_tasks={"sub-1": SUB_TASK, "sub-2": PENDING_SUB_TASK},
    state={"pending_group": "group-1"},
    status=tasks.TaskStatus.AWAITING_INPUT,
    tenant_id="acme",
    user_id="alice",
    session_id="s-1",
    agent_id="analyzer-1",
    agent_name="analyzer",
    human_input=HUMAN_WAIT,
    traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    created_at=T0,
    updated_at=T1,
)
PLAN_CONTEXT = plans.PlanContextData(
    plan_id="plan-1",
    plan_type="research.plan",
    goal_event="research.goal",
    goal_data={"topic": "AI trends"},
    response_event="research.completed",
    goal_correlation_id="corr-goal",
    status=plans.PlanStatus.PAUSED,
    state_machine=STATES,
    current_state="searching",
    results={"search": {"count": 3}},
    session_id="s-1",
    parent_plan_id="plan-0",
    tenant_id="acme",
    user_id="alice",
    agent_name="research-planner",
    correlation_ids=["corr-2"],
    current_action=PENDING_ACTION,
    pause_reason="budget_approval_required",
    history=[
        plans.PlanHistoryEntry(from_state=None, to_state="start", at=T0),
        plans.PlanHistoryEntry(
            from_state="start", to_state="searching", event_type=None, event_id=None, at=T1
        ),
    ],
)
SEMANTIC_RECORD = memory.SemanticMemoryRecord(
    memory_id="m-1",
    external_id="doc-7",
    content="Paris is the capital of France.",
    content_hash=canonical.text_hash("Paris is the capital of France."),
    visibility=memory.MemoryVisibility.PUBLIC,
    metadata={"source": "wiki"},
    user_id="alice",
    created_at=T0,
    updated_at=T0,
)
TURN = memory.EpisodicTurn(
    turn_id="turn-1",
    session_id="s-1",
    agent_id="assistant",
    role=memory.EpisodicRole.USER,
    content="hello",
    user_id="alice",
    sequence=1,
    created_at=T0,
)
PROCEDURE = memory.Procedure(
    procedure_id="proc-1",
    name="refund a duplicate charge",
    trigger="a customer was charged twice",
    steps=["find both charges", "refund the later one"],
    visibility=memory.MemoryVisibility.PRIVATE,
    user_id="alice",
    version=2,
    created_at=T0,
    updated_at=T1,
)
SNAPSHOT_SUMMARY: dict[str, Any] = {
    "session_id": "s-1",
    "agent_id": "assistant",
    "execution_id": "exec-1",
    "status": "completed",
    "slim": {"status": "completed", "step_count": 3},
    "full_bytes": 2048,
    "slim_bytes": 64,
    "version": 4,
    "created_at": T0,
    "updated_at": T1,
}
SUB_TASK_PROGRESS = tracker.SubTaskProgress(
    sub_task_id="sub-1",
    event_type="sentiment.analyze",
    response_event="sentiment.completed",
    status=tasks.SubTaskStatus.PENDING,
)
USAGE = notifications.TokenUsage(prompt_tokens=500, completion_tokens=150, total_tokens=650)
CONTINUATION = notifications.ContinuationPayload(
    step_number=2,
    should_continue=False,
    stop_reason="steps_limit",
    resolved_by="StepsLimit",
    evaluations=[
        notifications.ContinuationEvaluation(
            criterion="StepsLimit", decision="forbid", reason="20 >= 20"
        )
    ],
)
ENVELOPE_FIELDS: dict[str, Any] = {
    "id": "evt-1",
    "source": "agent://calculator",
    "type": "calculate.requested",
    "time": T0,
    "data": {"expression": "2 + 2"},
    "tenant_id": "acme",
    "plan_id": "plan-1",
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
}


CONTRACT_EXAMPLES: list[BaseModel] = [
    asyncapi.AsyncApiQuery(
        agent="calculator", event_type="calc.requested", format=asyncapi.AsyncApiFormat.YAML
    ),
    # envelope, errors, auth
    envelope.Envelope(**ENVELOPE_FIELDS, subject="x", myext="kept"),
    envelope.ActionRequest(**ENVELOPE_FIELDS, response_event="calculate.completed"),
    envelope.ActionResult(**ENVELOPE_FIELDS, correlation_id="corr-1"),
    envelope.BusinessFact(**ENVELOPE_FIELDS),
    envelope.SystemEvent(**ENVELOPE_FIELDS),
    envelope.Notification(**ENVELOPE_FIELDS),
    errors.ErrorBody(code="not_found", message="no such agent", details={"agent_id": "x"}),
    errors.ErrorResponse(error=errors.ErrorBody(code="conflict", message="version exists")),
    auth.TokenClaims(
        sub="alice", tenant_id="acme", user_id="alice", roles=[auth.Role.ADMIN], exp=1
    ),
    # pagination
    pagination.Page[memory.SessionRecord](
        items=[
            memory.SessionRecord(
                session_id="s-1",
                user_id="alice",
                plan_count=2,
                created_at=T0,
                last_activity_at=T1,
            )
        ],
        next_cursor=pagination.encode_cursor({"after": "s-1"}),
    ),
    pagination.PageQuery(cursor="abc", limit=10),
    # registry
    registry.SchemaRef(name="calculate.result", version="1.2.0"),
    CONSUMED,
    CAPABILITY,
    registry.AgentRegistration(
        agent_id="calculator-1",
        name="calculator",
        version="1.0.0",
        tags=["math"],
        capabilities=[CAPABILITY],
        events=[
            registry.EventDefinition(event_type="calc.done", topic="business-facts"),
            registry.EventDefinition(
                event_type="calc.audit",
                topic="system-events",
                direction=registry.EventDirection.CONSUMED,
            ),
        ],
        ttl_seconds=30,
        metadata={"team": "core"},
    ),
    AGENT_RECORD,
    registry.Heartbeat(instance_id="host-a:4242", ttl_seconds=60),
    registry.HeartbeatAck(
        agent_id="calculator-1",
        status=registry.AgentStatus.LIVE,
        last_heartbeat_at=T0,
        expires_at=T1,
    ),
    registry.AgentListQuery(capability="calculate", tag="math", q="arith", include_expired=True),
    registry.DiscoveryQuery(capability="calculate", limit=5),
    DISCOVERED_EVENT,
    registry.DiscoveredCapability(
        task_name="calculate",
        consumed_event=DISCOVERED_EVENT,
        produced_events=[
            registry.DiscoveredEvent(
                event_type="calculate.completed",
                topic="action-results",
                json_schema=RESPONSE_SCHEMA,
                schema_ref=registry.SchemaRef(name="calculate.result", version="1.2.0"),
            )
        ],
    ),
    registry.DiscoveredAgent(
        name="calculator",
        version="1.0.0",
        instance_count=2,
        agent_ids=["calculator-1", "calculator-2"],
        capabilities=[
            registry.DiscoveredCapability(task_name="calculate", consumed_event=DISCOVERED_EVENT)
        ],
        score=0.5,
    ),
    registry.EventRecord(
        event_type="calculate.requested",
        topic="action-requests",
        json_schema=REQUEST_SCHEMA,
        owner_agent_id="calculator-1",
        tenant_id="acme",
        created_at=T0,
        updated_at=T0,
    ),
    registry.EventListQuery(topic="action-requests", owner_agent_id="calculator-1"),
    registry.PayloadSchemaCreate(
        name="calculate.result", version="1.2.0", json_schema=RESPONSE_SCHEMA
    ),
    registry.PayloadSchema(
        name="calculate.result",
        version="1.2.0",
        json_schema=RESPONSE_SCHEMA,
        tenant_id="acme",
        content_hash=canonical.json_hash(RESPONSE_SCHEMA),
        created_at=T0,
    ),
    registry.SchemaValidationRequest(payload={"result": "four"}),
    registry.SchemaViolation(
        path="/result",
        message="'four' is not of type 'number'",
        validator="type",
        schema_path="/properties/result/type",
    ),
    registry.validate_payload(RESPONSE_SCHEMA, {"result": "four"}),
    # plans
    STATES["searching"].action,  # type: ignore[list-item]
    plans.StateTransition(on_event="a.done", to_state="done", condition="data.ok == true"),
    STATES["searching"],
    PLAN_DEFINITION,
    plans.PlanRegistrationRequest(plan=PLAN_DEFINITION),
    plans.PlanInstanceRequest(
        plan_type="research.plan",
        goal_data={"topic": "AI"},
        response_event="research.completed",
        session_id="s-1",
    ),
    plans.PlanHistoryEntry(
        from_state="start", to_state="searching", event_type="x.done", event_id="e", at=T0
    ),
    PLAN_CONTEXT,
    # tasks
    ERROR,
    tasks.ActionResultData.ok({"result": 4}, task_id="task-1"),
    tasks.DelegationSpec(
        event_type="sentiment.analyze", data={"text": "hi"}, response_event="sentiment.completed"
    ),
    SUB_TASK,
    PENDING_SUB_TASK,
    HUMAN_WAIT,
    PENDING_ACTION,
    TASK_CONTEXT,
    # system events
    system_events.SystemEventData(),
    system_events.TaskStartedData(
        task_id="task-1", plan_id="plan-1", agent_name="analyzer", event_type="analyze.requested"
    ),
    system_events.TaskProgressData(task_id="task-1", progress=0.5, message="halfway"),
    system_events.DelegatedSubTask(
        sub_task_id="sub-1", event_type="sentiment.analyze", response_event="sentiment.completed"
    ),
    system_events.TaskDelegatedData(
        task_id="task-1",
        sub_tasks=[
            system_events.DelegatedSubTask(
                sub_task_id="sub-1",
                event_type="sentiment.analyze",
                response_event="sentiment.completed",
            )
        ],
        parallel_group_id="group-1",
    ),
    system_events.TaskCompletedData(task_id="task-1", result={"ok": True}, duration_seconds=1.5),
    system_events.TaskFailedData(task_id="task-1", error=ERROR),
    system_events.TaskTimeoutData(
        task_id="task-1",
        request_id="q-1",
        correlation_id="task-1",
        response_event="document.approval.received",
        timeout_seconds=3600,
        deadline=T1,
    ),
    system_events.PlanStartedData(
        plan_id="plan-1", goal_event="research.goal", initial_state="start"
    ),
    system_events.PlanStateChangedData(
        plan_id="plan-1", from_state="start", to_state="searching", trigger_event="x.done"
    ),
    system_events.PlanPausedData(
        plan_id="plan-1", reason="budget approval", current_state="searching"
    ),
    system_events.PlanResumedData(plan_id="plan-1", current_state="searching"),
    system_events.PlanCompletedData(
        plan_id="plan-1", final_state="done", result={"summary": "..."}
    ),
    system_events.PlanFailedData(plan_id="plan-1", error=ERROR, final_state="failed"),
    registry.AgentRegisteredData(
        agent_id="calculator-1",
        name="calculator",
        version="1.0.0",
        capabilities=["calculate"],
        expires_at=T1,
    ),
    registry.AgentExpiredData(
        agent_id="calculator-1", name="calculator", last_heartbeat_at=T0, expired_at=T1
    ),
    registry.AgentDeregisteredData(agent_id="calculator-1", name="calculator", events_removed=2),
    # notifications
    notifications.HumanInputOption(value="yes", label="Approve"),
    notifications.HumanInputRequest(
        question="Approve this document?",
        response_event="document.approval.received",
        timeout_seconds=3600,
        options=[notifications.HumanInputOption(value=True, label="Approve")],
        answer_schema={"type": "boolean"},
        task_id="task-1",
        context={"document_url": "https://example.invalid/doc"},
    ),
    notifications.HumanInputResponse(
        answer=True, task_id="task-1", answered_by="bob", answered_at=T1
    ),
    notifications.TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3),
    notifications.ContinuationEvaluation(criterion="TokenBudget", decision="allow"),
    notifications.AgentStatusPayload(status="in_progress", step_count=3),
    notifications.StepStartedPayload(step_number=2, message_count=5, available_tools=["search"]),
    notifications.StepCompletedPayload(
        step_number=2,
        has_tool_calls=True,
        finish_reason="tool_calls",
        usage=USAGE,
        duration_ms=1250.5,
        continuation=CONTINUATION,
    ),
    notifications.ToolStartedPayload(
        tool_name="search", tool_call_id="call-1", args_summary="q: 'x'"
    ),
    notifications.ToolCompletedPayload(
        tool_name="search", tool_call_id="call-1", duration_ms=250.0, result_summary="3 hits"
    ),
    notifications.StreamChunkPayload(chunk="Here is", tokens_delta=2),
    CONTINUATION,
    notifications.ToolApprovalRequestedPayload(
        tool_call_id="call-1", tool_name="delete_file", arguments={"path": "/tmp/x"}
    ),
    notifications.ToolApprovedPayload(tool_call_id="call-1", decided_by="bob"),
    notifications.ToolDeniedPayload(tool_call_id="call-1", reason="too risky"),
    notifications.ToolExecutionStartedPayload(tool_call_id="call-1", arguments={"path": "/tmp/x"}),
    notifications.ToolExecutionSucceededPayload(
        tool_call_id="call-1", result="done", duration_ms=3.0
    ),
    notifications.ToolExecutionFailedPayload(tool_call_id="call-1", error=ERROR),
    notifications.ToolLogPayload(tool_call_id="call-1", level="debug", message="opening file"),
    notifications.AgentUIEvent.of(
        notifications.StepStartedPayload(step_number=1),
        session_id="s-1",
        execution_id="exec-1",
        agent_id="assistant",
        agent_name="Assistant",
    ),
]
