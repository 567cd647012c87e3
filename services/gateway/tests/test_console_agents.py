"""The console's view of agents: one row per agent name, however many processes registered
it; and, on the plans page, which unfinished plans wait for a planner that is not running."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from disco.clients import ServiceError
from disco_common.auth import Role
from disco_common.pagination import Page
from disco_common.plans import PlanStatus
from disco_common.registry import AgentRecord, AgentStatus
from disco_common.tracker import PlanProgress, PlanProgressQuery, PlanView
from disco_gateway.console.auth import ConsoleUser
from disco_gateway.console.clients import ConsoleClients
from disco_gateway.console.service import group_agents, list_plans, plan_detail
from disco_service import Identity

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def _record(
    agent_id: str, status: AgentStatus, heard_minutes_ago: int, **more: object
) -> AgentRecord:
    heard = NOW - timedelta(minutes=heard_minutes_ago)
    return AgentRecord.model_validate(
        {
            "agent_id": agent_id,
            "tenant_id": "acme",
            "name": agent_id.split(".")[0],
            "version": "1.0.0",
            "ttl_seconds": 30,
            "status": status,
            "registered_at": heard,
            "updated_at": heard,
            "last_heartbeat_at": heard,
            "expires_at": heard + timedelta(seconds=30),
            **more,
        }
    )


def test_registrations_are_grouped_by_name_live_names_first() -> None:
    groups = group_agents(
        [
            _record("zeta.1", AgentStatus.EXPIRED, 300),
            _record("alpha.old", AgentStatus.EXPIRED, 120, description="old"),
            _record("alpha.new", AgentStatus.LIVE, 1, description="new", live_instances=2),
            _record("alpha.late", AgentStatus.EXPIRED, 0, description="stopped just now"),
            _record("beta.1", AgentStatus.LIVE, 2, live_instances=1),
            _record("beta.2", AgentStatus.LIVE, 3, live_instances=1),
        ]
    )

    assert [(g.name, g.status) for g in groups] == [
        ("alpha", "live"),
        ("beta", "live"),
        ("zeta", "expired"),
    ]
    alpha, beta, zeta = groups
    # What the row shows comes from the live registration heard from last.
    assert alpha.latest.agent_id == "alpha.new"
    assert (alpha.live, alpha.registrations, alpha.live_instances) == (1, 3, 2)
    assert (beta.live, beta.registrations, beta.live_instances) == (2, 2, 2)
    assert (zeta.live, zeta.registrations, zeta.live_instances) == (0, 1, 0)


def _plan(plan_id: str, status: PlanStatus, planner: str) -> PlanProgress:
    return PlanProgress(plan_id=plan_id, status=status, agent_name=planner, updated_at=NOW)


@dataclass
class _Tracker:
    plans: list[PlanProgress]

    async def list_plans(self, query: PlanProgressQuery) -> Page[PlanProgress]:
        return Page(items=self.plans)


@dataclass
class _Registry:
    pages: list[Page[AgentRecord]]
    down: bool = False
    asked: list[int] = field(default_factory=list)

    async def live_agent_names(self, *, at_most: int) -> set[str] | None:
        if self.down:
            raise ServiceError(503, "unavailable", "the registry is down")
        self.asked.append(at_most)
        return {a.name for page in self.pages for a in page.items if a.status == AgentStatus.LIVE}


def _clients(tracker: _Tracker, registry: _Registry) -> ConsoleClients:
    return ConsoleClients(
        tracker=cast(Any, tracker), registry=cast(Any, registry), memory=cast(Any, None),
        probe=cast(Any, None),
    )  # fmt: skip


USER = ConsoleUser(
    Identity(tenant_id="acme", user_id="alice", sub="alice", roles=frozenset({Role.USER})), "t"
)
PLANS = _Tracker(
    [
        _plan("p-1", PlanStatus.RUNNING, "trip-planner"),
        _plan("p-2", PlanStatus.PAUSED, "holiday-planner"),
        _plan("p-3", PlanStatus.COMPLETED, "old-planner"),
        _plan("p-4", PlanStatus.RUNNING, "gone-planner"),
    ]
)


async def test_unfinished_plans_whose_planner_has_no_live_registration_are_named() -> None:
    registry = _Registry(
        [
            Page(items=[_record("trip-planner.a", AgentStatus.LIVE, 0)], next_cursor="1"),
            Page(
                items=[
                    _record("holiday-planner.b", AgentStatus.LIVE, 0),
                    _record("gone-planner.c", AgentStatus.EXPIRED, 60),
                ]
            ),
        ]
    )

    shown = await list_plans(_clients(PLANS, registry), USER, PlanProgressQuery())

    assert [p.plan_id for p in shown.page.items] == ["p-1", "p-2", "p-3", "p-4"]
    # A finished plan's planner does not matter (old-planner is not asked about).
    assert shown.planners_down == {"gone-planner"}
    assert registry.asked == [1000]  # asked once, for at most 1,000 registrations


async def test_when_the_registry_cannot_tell_no_planner_is_said_to_be_down() -> None:
    shown = await list_plans(_clients(PLANS, _Registry([], down=True)), USER, PlanProgressQuery())

    assert len(shown.page.items) == 4
    assert shown.planners_down == frozenset()


@dataclass
class _PlanTracker:
    view: PlanView

    async def get_plan(self, plan_id: str) -> PlanView | None:
        return self.view if plan_id == self.view.plan.plan_id else None

    async def list_plan_tasks(self, plan_id: str, *, limit: int) -> Page[Any]:
        return Page(items=[])

    async def plan_timeline(self, plan_id: str, *, limit: int) -> Page[Any]:
        return Page(items=[])

    async def plan_tree(self, plan_id: str) -> None:
        return None


async def test_a_plan_page_says_when_its_planner_is_not_running() -> None:
    registry = _Registry([Page(items=[_record("trip-planner.a", AgentStatus.LIVE, 0)])])

    async def detail(plan: PlanProgress) -> bool:
        tracker = _PlanTracker(PlanView(plan=plan))
        shown = await plan_detail(_clients(cast(Any, tracker), registry), USER, plan.plan_id)
        assert shown is not None
        return shown.planner_down

    assert await detail(_plan("p-1", PlanStatus.RUNNING, "gone-planner"))
    assert not await detail(_plan("p-2", PlanStatus.RUNNING, "trip-planner"))
    assert not await detail(_plan("p-3", PlanStatus.COMPLETED, "gone-planner"))
