"""What the console's pages show, gathered from the services with the person's own token.

Every function takes the signed-in :class:`ConsoleUser` and calls the services
inside :func:`forwarding` its token: the tracker, registry and memory service
scope their answers to that tenant and user, so the console shows nothing a
person could not read from the API themselves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import httpx

from disco.clients import ServiceError
from disco_common.memory import SessionRecord
from disco_common.pagination import Page
from disco_common.registry import AgentRecord, AgentStatus
from disco_common.tracker import (
    AgentMetrics,
    HumanInputWaitRecord,
    PlanProgress,
    PlanProgressQuery,
    PlanTreeNode,
    PlanView,
    TaskProgress,
    TimelineEntry,
)
from disco_gateway.console.auth import ConsoleUser
from disco_gateway.console.clients import ConsoleClients, forwarding
from disco_gateway.console.diagram import Diagram, layout
from disco_gateway.push.repository import WaitingDelivery, waiting_deliveries
from disco_gateway.state import GatewayState

__all__ = [
    "AgentGroup",
    "AgentsOverview",
    "DependencyHealth",
    "PlanDetail",
    "PlansPage",
    "ServiceHealth",
    "SessionsOverview",
    "agents_overview",
    "group_agents",
    "health",
    "list_plans",
    "plan_detail",
    "sessions_overview",
    "waiting_pushes",
]

_PAGE = 50
_AGENT_PAGES = 10


@dataclass(frozen=True)
class PlansPage:
    """A page of plans, and which of their planners have no live registration."""

    page: Page[PlanProgress]
    planners_down: frozenset[str]
    """Names of the planners of unfinished plans on the page that the registry has no
    live registration of (empty when the registry could not tell): such a plan moves
    again only once its planner runs."""


async def list_plans(
    clients: ConsoleClients, user: ConsoleUser, query: PlanProgressQuery
) -> PlansPage:
    """One page of the person's tenant's plans matching ``query``, newest first."""
    with forwarding(user.token):
        page = await clients.tracker.list_plans(query)
        waiting = {
            p.agent_name for p in page.items if p.agent_name is not None and not p.status.is_final
        }
        down: frozenset[str] = frozenset()
        if waiting:
            live = await _live_agent_names(clients)
            if live is not None:
                down = frozenset(waiting - live)
    return PlansPage(page, down)


async def _live_agent_names(clients: ConsoleClients) -> set[str] | None:
    """The names with a live registration in the registry, or None if it cannot tell."""
    try:
        return await clients.registry.live_agent_names(at_most=_AGENT_PAGES * 100)
    except ServiceError:
        return None


@dataclass(frozen=True)
class PlanDetail:
    """Everything the plan page shows."""

    view: PlanView
    tasks: list[TaskProgress]
    timeline: list[TimelineEntry]
    timeline_more: bool
    tree: PlanTreeNode | None
    diagram: Diagram | None
    planner_down: bool = False
    """The plan is unfinished and the registry has no live registration of its planner."""

    @property
    def plan(self) -> PlanProgress:
        return self.view.plan


async def plan_detail(
    clients: ConsoleClients, user: ConsoleUser, plan_id: str
) -> PlanDetail | None:
    """A plan with its state machine, tasks, timeline and sub-plans (None if unknown)."""
    tracker = clients.tracker
    with forwarding(user.token):
        view = await tracker.get_plan(plan_id)
        if view is None:
            return None
        tasks, timeline, tree = await asyncio.gather(
            tracker.list_plan_tasks(plan_id, limit=200),
            tracker.plan_timeline(plan_id, limit=200),
            tracker.plan_tree(plan_id),
        )
        planner = view.plan.agent_name
        planner_down = False
        if planner is not None and not view.plan.status.is_final:
            live = await _live_agent_names(clients)
            planner_down = live is not None and planner not in live
    diagram = None
    if view.definition is not None:
        moves = view.transitions
        diagram = layout(
            view.definition.definition,
            current_state=view.plan.current_state,
            visited={m.to_state for m in moves} | {m.from_state for m in moves if m.from_state},
            taken={(m.from_state, m.to_state) for m in moves if m.from_state},
        )
    return PlanDetail(
        view=view,
        tasks=tasks.items,
        timeline=timeline.items,
        timeline_more=timeline.next_cursor is not None,
        tree=tree,
        diagram=diagram,
        planner_down=planner_down,
    )


@dataclass(frozen=True)
class AgentGroup:
    """The registrations of one agent name: each process of an agent registers its own
    (``name.<random>``), so a name run a few times has many, most of them expired."""

    name: str
    latest: AgentRecord
    """The registration heard from last (live before expired): description, version,
    capabilities."""
    live_instances: int
    live: int
    registrations: int

    @property
    def status(self) -> str:
        return "live" if self.live else "expired"


@dataclass(frozen=True)
class AgentsOverview:
    """The registry's agents (live and expired) by name, and the tracker's figures per name."""

    agents: list[AgentGroup]
    metrics: dict[str, AgentMetrics]
    truncated: bool


def group_agents(records: Iterable[AgentRecord]) -> list[AgentGroup]:
    """One :class:`AgentGroup` per name: live names first, then by name."""
    by_name: dict[str, list[AgentRecord]] = {}
    for record in records:
        by_name.setdefault(record.name, []).append(record)
    groups = []
    for name, named in by_name.items():
        latest = max(named, key=lambda r: (r.status == AgentStatus.LIVE, r.last_heartbeat_at))
        live = [r for r in named if r.status == AgentStatus.LIVE]
        groups.append(
            AgentGroup(
                name=name,
                latest=latest,
                live_instances=sum(r.live_instances for r in live),
                live=len(live),
                registrations=len(named),
            )
        )
    groups.sort(key=lambda g: (not g.live, g.name))
    return groups


async def agents_overview(clients: ConsoleClients, user: ConsoleUser) -> AgentsOverview:
    """Every agent the person's tenant sees, live first, with last hour's task figures."""
    agents: list[AgentRecord] = []
    cursor: str | None = None
    truncated = False
    with forwarding(user.token):
        metrics_page = asyncio.ensure_future(clients.tracker.agent_metrics(limit=200))
        try:
            for _ in range(_AGENT_PAGES):
                page = await clients.registry.list_agents(
                    include_expired=True, limit=100, cursor=cursor
                )
                agents += page.items
                cursor = page.next_cursor
                if cursor is None:
                    break
            else:
                truncated = True
        finally:
            metrics = await metrics_page
    return AgentsOverview(
        agents=group_agents(agents),
        metrics={m.agent_name: m for m in metrics.items},
        truncated=truncated,
    )


@dataclass(frozen=True)
class SessionsOverview:
    """The person's sessions and the questions to humans waiting for an answer."""

    sessions: list[SessionRecord]
    questions: list[HumanInputWaitRecord]


async def sessions_overview(clients: ConsoleClients, user: ConsoleUser) -> SessionsOverview:
    """The person's recent sessions (memory) and the tenant's open questions (tracker)."""
    with forwarding(user.token):
        sessions, questions = await asyncio.gather(
            clients.memory.list_sessions(limit=_PAGE),
            clients.tracker.list_questions(status="waiting", limit=_PAGE),
        )
    return SessionsOverview(sessions=sessions.items, questions=questions.items)


async def waiting_pushes(
    state: GatewayState, user: ConsoleUser, *, limit: int = 200
) -> list[WaitingDelivery]:
    """The tenant's push notifications not delivered yet (retries due, tries under way)."""
    database = state.require_database()
    async with database.unit_of_work(user.tenant_id, user.user_id) as session:
        return await waiting_deliveries(session, user.tenant_id, limit=limit)


@dataclass(frozen=True)
class DependencyHealth:
    """One dependency of a service (database, Kafka) as its ``/readyz`` reports it."""

    name: str
    ok: bool
    latency_ms: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class ServiceHealth:
    """One service: whether it is ready, and each of its dependencies."""

    name: str
    url: str
    ready: bool
    latency_ms: float | None
    error: str | None = None
    checks: list[DependencyHealth] = field(default_factory=list)


def _checks(body: object) -> list[DependencyHealth]:
    # 200: {"checks": {...}}; 503: {"error": {"details": {"checks": {...}}}}.
    if not isinstance(body, dict):
        return []
    checks = body.get("checks")
    if checks is None:
        error = body.get("error")
        details = error.get("details") if isinstance(error, dict) else None
        checks = details.get("checks") if isinstance(details, dict) else None
    if not isinstance(checks, dict):
        return []
    return [
        DependencyHealth(
            name=str(name),
            ok=bool(result.get("ok")),
            latency_ms=result.get("latency_ms"),
            error=result.get("error"),
        )
        for name, result in checks.items()
        if isinstance(result, dict)
    ]


async def _probe(clients: ConsoleClients, name: str, url: str) -> ServiceHealth:
    started = time.perf_counter()
    try:
        response = await clients.probe.get(f"{url.rstrip('/')}/readyz")
    except httpx.HTTPError as exc:
        return ServiceHealth(
            name=name, url=url, ready=False, latency_ms=None, error=f"{type(exc).__name__}: {exc}"
        )
    latency = round((time.perf_counter() - started) * 1000, 1)
    try:
        body = response.json()
    except ValueError:
        body = None
    return ServiceHealth(
        name=name,
        url=url,
        ready=response.status_code == 200,
        latency_ms=latency,
        error=None if response.status_code == 200 else f"HTTP {response.status_code}",
        checks=_checks(body),
    )


async def _own(state: GatewayState) -> ServiceHealth:
    started = time.perf_counter()
    names = list(state.readiness_checks)

    async def run(name: str) -> DependencyHealth:
        began = time.perf_counter()
        try:
            async with asyncio.timeout(state.settings.readiness_timeout_seconds):
                await state.readiness_checks[name]()
        except Exception as exc:
            return DependencyHealth(name, ok=False, error=f"{type(exc).__name__}: {exc}")
        latency = round((time.perf_counter() - began) * 1000, 1)
        return DependencyHealth(name, ok=True, latency_ms=latency)

    checks = list(await asyncio.gather(*(run(name) for name in names)))
    return ServiceHealth(
        name="gateway",
        url=state.settings.gateway_public_url,
        ready=all(check.ok for check in checks),
        latency_ms=round((time.perf_counter() - started) * 1000, 1),
        checks=checks,
    )


async def health(state: GatewayState, clients: ConsoleClients) -> list[ServiceHealth]:
    """Each service's readiness: the gateway's own checks, the others' ``/readyz``."""
    settings = state.settings
    others = {
        "registry": settings.registry_url,
        "memory": settings.memory_url,
        "tracker": settings.tracker_url,
    }
    return list(
        await asyncio.gather(
            _own(state), *(_probe(clients, name, url) for name, url in others.items())
        )
    )
