"""Envelopes of a plan as the SDK publishes them, to feed the tracker in tests.

One planner runs a plan: its action asks a worker for quotes, the worker fans
out to three carriers (a tool), fans back in and answers; the plan moves on
and completes, with a sub-plan beside it. Times are fixed and a millisecond
apart, so the order things happened is known whatever order they arrive in.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from disco_common.envelope import Envelope, envelope_class_for
from disco_common.system_events import SystemEventType
from disco_common.topics import Topic

__all__ = ["Scenario", "plan_scenario"]

PLANNER = "trip-planner"
WORKER = "shipping-broker"
TOOL = "carriers"
CARRIERS = ("swift", "steady", "slow-boat")


@dataclass
class Scenario:
    """The envelopes (with their topics) and the ids a test asserts on."""

    tenant: str
    plan_id: str
    sub_plan_id: str
    goal_task_id: str
    action_task_id: str
    group_id: str
    sub_task_ids: list[str]
    started: datetime
    envelopes: list[tuple[Topic, Envelope]] = field(default_factory=list)

    def by_type(self, event_type: str) -> list[Envelope]:
        return [e for _, e in self.envelopes if e.type == event_type]

    def for_tenant(self, tenant: str) -> Scenario:
        """The very same envelopes (ids, times), published for another tenant."""
        return replace(
            self,
            tenant=tenant,
            envelopes=[(t, e.with_changes(tenant_id=tenant)) for t, e in self.envelopes],
        )

    def of_plan(self) -> list[Envelope]:
        """The envelopes of the plan itself (its timeline), in the order they happened."""
        return [e for _, e in self.envelopes if e.plan_id == self.plan_id]


class _Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def tick(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def plan_scenario(tenant: str, *, start: datetime | None = None) -> Scenario:
    """The envelopes of one run of the demo's planner and fan-out worker, for ``tenant``."""
    uid = uuid.uuid4().hex[:8]
    clock = _Clock(start or datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
    plan_id = f"plan-{uid}"
    goal = f"goal-{uid}"
    action = f"action-{uid}"
    group = f"group-{uid}"
    subs = [f"sub-{uid}-{i}" for i in range(3)]
    action_correlation = f"plan.m.{plan_id}.1"
    sc = Scenario(
        tenant=tenant,
        plan_id=plan_id,
        sub_plan_id=f"subplan-{uid}",
        goal_task_id=goal,
        action_task_id=action,
        group_id=group,
        sub_task_ids=subs,
        started=clock.now,
    )

    def add(
        topic: Topic,
        event_type: str,
        data: Any,
        *,
        source: str,
        id: str | None = None,
        **attrs: Any,
    ) -> Envelope:
        envelope = envelope_class_for(topic).from_dict(
            {
                "id": id or f"evt-{uuid.uuid4().hex}",
                "source": f"disco://agent/{source}",
                "type": event_type,
                "time": clock.tick(),
                "data": data,
                "tenant_id": tenant,
                **{k: v for k, v in attrs.items() if v is not None},
            }
        )
        sc.envelopes.append((topic, envelope))
        return envelope

    def system(
        event_type: SystemEventType, data: dict[str, Any], source: str, **attrs: Any
    ) -> None:
        add(Topic.SYSTEM_EVENTS, event_type.value, data, source=source, **attrs)

    planner = {"agent_name": PLANNER, "agent_id": f"{PLANNER}-1"}
    worker = {"agent_name": WORKER, "agent_id": f"{WORKER}-1"}
    add(
        Topic.ACTION_REQUESTS,
        "trip.requested",
        {"city": "Lisbon"},
        source="caller",
        id=goal,
        correlation_id=f"corr-{uid}",
        response_event="trip.planned",
    )
    system(
        SystemEventType.PLAN_STARTED,
        {
            "plan_id": plan_id,
            **planner,
            "goal_event": "trip.requested",
            "goal_task_id": goal,
            "plan_type": "trip",
            "plan_type_version": "1.0.0",
            "initial_state": "start",
        },
        PLANNER,
        plan_id=plan_id,
    )
    system(
        SystemEventType.PLAN_STATE_CHANGED,
        {"plan_id": plan_id, **planner, "step": 0, "from_state": None, "to_state": "start"},
        PLANNER,
        plan_id=plan_id,
    )
    system(
        SystemEventType.PLAN_STATE_CHANGED,
        {"plan_id": plan_id, **planner, "step": 1, "from_state": "start", "to_state": "quoting"},
        PLANNER,
        plan_id=plan_id,
    )
    add(
        Topic.ACTION_REQUESTS,
        "shipping.quote.requested",
        {"kg": 3.5},
        source=PLANNER,
        id=action,
        correlation_id=action_correlation,
        response_event="shipping.quoted",
        plan_id=plan_id,
    )
    system(
        SystemEventType.TASK_STARTED,
        {
            "task_id": action,
            "plan_id": plan_id,
            **worker,
            "event_type": "shipping.quote.requested",
            "correlation_id": action_correlation,
        },
        WORKER,
        plan_id=plan_id,
        task_id=action,
    )
    for sub, carrier in zip(subs, CARRIERS, strict=True):
        add(
            Topic.ACTION_REQUESTS,
            "carrier.quote.requested",
            {"carrier": carrier, "kg": 3.5},
            source=WORKER,
            correlation_id=sub,
            task_id=sub,
            response_event="carrier.quoted",
            plan_id=plan_id,
        )
    system(
        SystemEventType.TASK_DELEGATED,
        {
            "task_id": action,
            "plan_id": plan_id,
            **worker,
            "parallel_group_id": group,
            "sub_tasks": [
                {
                    "sub_task_id": sub,
                    "event_type": "carrier.quote.requested",
                    "response_event": "carrier.quoted",
                }
                for sub in subs
            ],
        },
        WORKER,
        plan_id=plan_id,
        task_id=action,
    )
    for sub, carrier in zip(subs, CARRIERS, strict=True):
        add(
            Topic.ACTION_RESULTS,
            "carrier.quoted",
            {"success": True, "result": {"carrier": carrier, "price": 3.5}},
            source=TOOL,
            correlation_id=sub,
            task_id=sub,
            plan_id=plan_id,
        )
    system(
        SystemEventType.TASK_COMPLETED,
        {
            "task_id": action,
            "plan_id": plan_id,
            **worker,
            "result": {"best": "slow-boat"},
            "duration_seconds": 0.004,
        },
        WORKER,
        plan_id=plan_id,
        task_id=action,
    )
    add(
        Topic.ACTION_RESULTS,
        "shipping.quoted",
        {"success": True, "result": {"best": "slow-boat"}, "task_id": action},
        source=WORKER,
        correlation_id=action_correlation,
        task_id=action,
        plan_id=plan_id,
    )
    system(
        SystemEventType.PLAN_STATE_CHANGED,
        {
            "plan_id": plan_id,
            **planner,
            "step": 2,
            "from_state": "quoting",
            "to_state": "done",
            "trigger_event": "shipping.quoted",
        },
        PLANNER,
        plan_id=plan_id,
    )
    # A sub-plan of the plan (a goal its planner asked another planner for).
    system(
        SystemEventType.PLAN_STARTED,
        {
            "plan_id": sc.sub_plan_id,
            "agent_name": "packing-planner",
            "goal_event": "packing.requested",
            "parent_plan_id": plan_id,
            "initial_state": "start",
        },
        "packing-planner",
        plan_id=sc.sub_plan_id,
    )
    system(
        SystemEventType.PLAN_COMPLETED,
        {"plan_id": sc.sub_plan_id, "agent_name": "packing-planner", "final_state": "packed"},
        "packing-planner",
        plan_id=sc.sub_plan_id,
    )
    system(
        SystemEventType.PLAN_COMPLETED,
        {"plan_id": plan_id, **planner, "final_state": "done", "result": {"best": "slow-boat"}},
        PLANNER,
        plan_id=plan_id,
    )
    add(
        Topic.ACTION_RESULTS,
        "trip.planned",
        {"success": True, "result": {"best": "slow-boat"}},
        source=PLANNER,
        correlation_id=f"corr-{uid}",
        task_id=goal,
    )
    return sc
