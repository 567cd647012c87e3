"""``disco plans list|show|watch``: what the tracker knows of the plans that ran.

Reads the tracker with :class:`~disco.clients.TrackerClient`; the URL and the
token come from the ``DISCO_*`` settings (``DISCO_TRACKER_URL``, and in dev a
token minted for ``DISCO_TENANT_ID``), or ``--url`` / ``--tenant``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from disco.clients import RegistryClient, ServiceClientSettings, ServiceError, TrackerClient
from disco_common.pagination import Page
from disco_common.plans import PlanStatus
from disco_common.tasks import TaskStatus
from disco_common.tracker import (
    DelegationGroupProgress,
    FeedEvent,
    PlanProgress,
    PlanTreeNode,
    PlanView,
    TaskProgress,
    TimelineEntry,
)

app = typer.Typer(
    name="plans",
    help="Plans as the tracker sees them: list, show one, watch changes live.",
    no_args_is_help=True,
)

T = TypeVar("T")

_STATUS_STYLE = {
    "pending": "dim",
    "running": "cyan",
    "waiting": "cyan",
    "awaiting_input": "yellow",
    "paused": "yellow",
    "completed": "green",
    "failed": "bold red",
}
_TIMELINE_SHOWN = 200

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url", help="The tracker's URL (default: DISCO_TRACKER_URL).", show_default=False
    ),
]
TenantOption = Annotated[
    str | None,
    typer.Option(
        "--tenant",
        "-t",
        help="Dev: read as this tenant (default: DISCO_TENANT_ID).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


def _settings(url: str | None, tenant: str | None) -> ServiceClientSettings:
    overrides: dict[str, Any] = {}
    if url is not None:
        overrides["tracker_url"] = url
    if tenant is not None:
        overrides["tenant_id"] = tenant
    return ServiceClientSettings(**overrides)


def _client(url: str | None, tenant: str | None) -> TrackerClient:
    return TrackerClient.from_settings(_settings(url, tenant))


async def _planners_down(
    plans: Sequence[PlanProgress], settings: ServiceClientSettings
) -> set[str]:
    """The planners of unfinished ``plans`` the registry has no live registration of;
    empty when it cannot tell (it is asked once, briefly, and never waited on)."""
    waiting = {p.agent_name for p in plans if p.agent_name and not p.status.is_final}
    if not waiting:
        return set()
    registry = RegistryClient(
        settings.registry_url, token=settings.token_provider(), timeout_seconds=3, retries=0
    )
    try:
        async with registry:
            live = await registry.live_agent_names()
    except ServiceError:
        return set()
    return waiting - live if live is not None else set()


def _run(url: str | None, tenant: str | None, work: Callable[[TrackerClient], Awaitable[T]]) -> T:
    async def main() -> T:
        async with _client(url, tenant) as client:
            return await work(client)

    try:
        return asyncio.run(main())
    except ServiceError as exc:
        typer.secho(f"error: {exc.message} ({exc.code})", err=True, fg=typer.colors.RED)
        raise typer.Exit(1) from None


_TABLE_WIDTH = 120
"""Columns ``plans list`` needs for its table (a plan id alone is 36)."""


def _status(value: str) -> Text:
    return Text(value, style=_STATUS_STYLE.get(value, ""))


def _when(value: datetime | None) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def _ms(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


def _counts(plan: PlanProgress) -> str:
    total = sum(plan.task_counts.values())
    done = plan.task_counts.get(TaskStatus.COMPLETED, 0)
    failed = plan.task_counts.get(TaskStatus.FAILED, 0)
    text = f"{done}/{total}"
    return f"{text} ({failed} failed)" if failed else text


def _dump(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, default=str))


@app.command("list")
def list_plans(
    status: Annotated[
        PlanStatus | None, typer.Option("--status", "-s", help="Only plans in this status.")
    ] = None,
    plan_type: Annotated[str | None, typer.Option("--type", help="Only this plan type.")] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Run by, or with a task of, this agent.")
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="Only this session.")] = None,
    parent: Annotated[
        str | None, typer.Option("--parent", help="Only the sub-plans of this plan.")
    ] = None,
    root: Annotated[bool, typer.Option("--root", help="Only top-level plans.")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=200)] = 50,
    as_json: JsonOption = False,
    url: UrlOption = None,
    tenant: TenantOption = None,
) -> None:
    """The newest plans: status, state, planner, tasks done, times.

    An unfinished plan whose planner has no live registration in the registry is
    marked: it moves again only once its planner runs.
    """

    async def fetch(client: TrackerClient) -> tuple[Page[PlanProgress], set[str]]:
        page = await client.list_plans(
            status=status,
            plan_type=plan_type,
            agent_name=agent,
            session_id=session,
            parent_plan_id=parent,
            root_only=root or None,
            limit=limit,
        )
        if as_json:
            return page, set()
        return page, await _planners_down(page.items, _settings(url, tenant))

    page, down = _run(url, tenant, fetch)
    if as_json:
        _dump(page.model_dump(mode="json"))
        return

    def stuck(plan: PlanProgress) -> bool:
        return not plan.status.is_final and plan.agent_name in down

    title = f"plans ({len(page.items)}{'+' if page.next_cursor else ''})"
    console = Console()
    if console.width < _TABLE_WIDTH:
        # Too narrow for the table (the whole plan id, to paste into `plans show`,
        # would squeeze the other columns to nothing): a block per plan.
        console.print(Text(title, style="bold"))
        for plan in page.items:
            head = Text(plan.plan_id)
            head.append("  ")
            head.append_text(_status(plan.status.value))
            if stuck(plan):
                head.append(" (planner not running)", style="yellow")
            if plan.current_state:
                head.append(f"  in {plan.current_state}")
            details = [
                plan.plan_type or plan.goal_event or "",
                plan.agent_name or "",
                f"tasks {_counts(plan)}",
                _when(plan.started_at),
                _ms(plan.duration_ms),
            ]
            console.print(head)
            console.print(Text("  " + " · ".join(filter(None, details)), style="dim"))
        return

    table = Table(title=title)
    for column in ("plan", "type", "status", "state", "planner", "tasks", "started", "took"):
        table.add_column(column, no_wrap=column in {"plan", "status", "started"})
    for plan in page.items:
        marked = _status(plan.status.value)
        if stuck(plan):
            marked.append("*", style="yellow")
        table.add_row(
            plan.plan_id,
            plan.plan_type or plan.goal_event or "",
            marked,
            plan.current_state or "",
            plan.agent_name or "",
            _counts(plan),
            _when(plan.started_at),
            _ms(plan.duration_ms),
        )
    console.print(table)
    if any(stuck(plan) for plan in page.items):
        names = ", ".join(sorted(down))
        console.print(
            Text(f"* planner not running ({names}): the plan moves again once it runs", "yellow")
        )


def _machine(view: PlanView) -> Panel | None:
    definition = view.definition
    if definition is None:
        return None
    current = view.plan.current_state
    visited = {move.to_state for move in view.transitions}
    states = definition.definition.states
    # In the order a plan meets them (stored definitions keep no order of their own).
    order: list[str] = []
    queue = [definition.definition.initial_state]
    while queue:
        name = queue.pop(0)
        if name in order or name not in states:
            continue
        order.append(name)
        queue.extend(states[name].targets)
    order += [name for name in states if name not in order]
    lines = Text()
    for name in order:
        state = states[name]
        marker = "▶ " if name == current else "✓ " if name in visited else "  "
        style = "bold green" if name == current else "" if name in visited else "dim"
        lines.append(f"{marker}{name}", style=style)
        targets = [
            f"{t.on_event}{f' [{t.condition}]' if t.condition else ''} → {t.to_state}"
            for t in state.transitions
        ]
        if state.default_next:
            targets.append(f"→ {state.default_next}")
        if state.is_terminal:
            targets.append("(end, failed)" if state.is_failure else "(end)")
        lines.append(f"   {'; '.join(targets)}\n", style="dim")
    path = " → ".join(["·", *[move.to_state for move in view.transitions]])
    lines.append(f"\npath: {path}")
    title = f"state machine {definition.plan_type} {definition.version}"
    return Panel(lines, title=title, expand=False)


def _tasks_table(tasks: Sequence[TaskProgress]) -> Table:
    table = Table(title=f"tasks ({len(tasks)})")
    for column in ("task", "request", "agent", "status", "try", "took", "error"):
        table.add_column(column, no_wrap=column in {"status", "try", "took"})
    for task in tasks:
        indent = "  └ " if task.parent_task_id else ""
        table.add_row(
            f"{indent}{task.task_id}",
            task.event_type or "",
            task.agent_name or "",
            _status(task.status.value),
            str(task.attempt or ""),
            _ms(task.duration_ms),
            f"{task.error.type}: {task.error.message}" if task.error else "",
        )
    return table


def _groups_table(groups: Sequence[DelegationGroupProgress]) -> Table:
    table = Table(title="fan-out groups")
    for column in ("group", "by", "done", "failed", "pending"):
        table.add_column(column)
    for group in groups:
        table.add_row(
            group.parallel_group_id,
            f"{group.agent_name or ''} ({group.task_id})",
            f"{group.completed} of {group.total}",
            str(group.failed),
            str(group.pending),
        )
    return table


def _tree(node: PlanTreeNode, into: Tree | None = None) -> Tree:
    label = Text(f"{node.plan_id} ")
    label.append(node.status.value, style=_STATUS_STYLE.get(node.status.value, ""))
    label.append(f"  {node.plan_type or node.goal_event or ''} @ {node.current_state or ''}")
    branch = into.add(label) if into is not None else Tree(label)
    for child in node.children:
        _tree(child, branch)
    return branch


def _timeline_table(entries: Sequence[TimelineEntry]) -> Table:
    table = Table(title=f"timeline ({len(entries)})")
    for column in ("at", "event", "agent", "summary"):
        table.add_column(column, no_wrap=column in {"at", "event"})
    for entry in entries:
        table.add_row(
            entry.at.astimezone().strftime("%H:%M:%S.%f")[:-3],
            entry.event_type,
            entry.agent_name or "",
            entry.summary or "",
        )
    return table


@app.command("show")
def show_plan(
    plan_id: Annotated[str, typer.Argument(help="The plan's id.")],
    as_json: JsonOption = False,
    url: UrlOption = None,
    tenant: TenantOption = None,
) -> None:
    """One plan: its state machine and path, tasks with agents and outcomes, fan-out
    groups, sub-plans and timeline."""

    async def gather(client: TrackerClient) -> dict[str, Any] | None:
        view = await client.get_plan(plan_id)
        if view is None:
            return None
        tasks = [task async for task in client.iter_plan_tasks(plan_id)]
        group_ids = sorted({t.parallel_group_id for t in tasks if t.parallel_group_id})
        groups = [g for gid in group_ids if (g := await client.get_delegation(gid)) is not None]
        timeline = (await client.plan_timeline(plan_id, limit=_TIMELINE_SHOWN)).items
        return {
            "view": view,
            "tasks": tasks,
            "groups": groups,
            "tree": await client.plan_tree(plan_id),
            "timeline": timeline,
        }

    found = _run(url, tenant, gather)
    if found is None:
        typer.secho(f"no plan {plan_id!r} is known to the tracker", err=True, fg="red")
        raise typer.Exit(1)
    if as_json:
        _dump(
            {
                key: [item.model_dump(mode="json") for item in value]
                if isinstance(value, list)
                else value.model_dump(mode="json")
                if value is not None
                else None
                for key, value in found.items()
            }
        )
        return
    view: PlanView = found["view"]
    plan = view.plan
    head = Text()
    head.append(f"{plan.plan_id}  ", style="bold")
    head.append(plan.status.value, style=_STATUS_STYLE.get(plan.status.value, ""))
    head.append(f"  in {plan.current_state or '?'}\n")
    for label, value in (
        ("type", f"{plan.plan_type or ''} {plan.plan_type_version or ''}".strip()),
        ("goal", plan.goal_event),
        ("planner", plan.agent_name),
        ("session", plan.session_id),
        ("parent", plan.parent_plan_id),
        ("started", _when(plan.started_at)),
        ("ended", _when(plan.completed_at)),
        ("took", _ms(plan.duration_ms)),
        ("tasks", _counts(plan)),
        ("paused", plan.pause_reason),
        ("error", f"{plan.error.type}: {plan.error.message}" if plan.error else None),
    ):
        if value:
            head.append(f"{label:>8}: {value}\n")
    parts: list[Any] = [Panel(head, title="plan", expand=False)]
    machine = _machine(view)
    if machine is not None:
        parts.append(machine)
    parts.append(_tasks_table(found["tasks"]))
    if found["groups"]:
        parts.append(_groups_table(found["groups"]))
    if found["tree"] is not None and found["tree"].children:
        parts.append(Panel(_tree(found["tree"]), title="sub-plans", expand=False))
    parts.append(_timeline_table(found["timeline"]))
    Console().print(Group(*parts))


def _change_line(change: FeedEvent) -> Text:
    line = Text(f"{change.at.astimezone().strftime('%H:%M:%S')} #{change.id:<6} ")
    line.append(f"{change.kind.value:<4} ", style="bold")
    line.append(change.status, style=_STATUS_STYLE.get(change.status, ""))
    subject = change.plan_id if change.kind == "plan" else change.task_id
    detail = change.current_state if change.kind == "plan" else change.event_type
    line.append(f"  {subject or ''}  {detail or ''}")
    if change.agent_name:
        line.append(f"  by {change.agent_name}", style="dim")
    if change.cause:
        line.append(f"  ({change.cause})", style="dim")
    return line


@app.command("watch")
def watch(
    plan_id: Annotated[
        str | None, typer.Argument(help="Only this plan's changes (default: all).")
    ] = None,
    from_start: Annotated[
        bool, typer.Option("--from-start", help="First every change the tracker still keeps.")
    ] = False,
    after: Annotated[
        int | None, typer.Option("--after", help="Resume after this change id.", min=0)
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", help="Stop after this many changes.", min=1)
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    tenant: TenantOption = None,
) -> None:
    """Follow changes to plans and tasks live, one line each (Ctrl-C stops)."""
    console = Console()
    start = 0 if from_start else after

    async def follow(client: TrackerClient) -> None:
        shown = 0
        async for change in client.feed(after=start, plan_id=plan_id):
            if as_json:
                typer.echo(change.model_dump_json(exclude_none=True))
            else:
                console.print(_change_line(change))
            shown += 1
            if limit is not None and shown >= limit:
                return

    try:
        _run(url, tenant, follow)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
