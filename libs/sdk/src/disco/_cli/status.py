"""``disco status``: the stack's health and consumer lag at a glance."""

from __future__ import annotations

from typing import Annotated

import typer


def status(
    timeout: Annotated[
        float, typer.Option(help="Seconds each component may take to answer.", min=0.1)
    ] = 5.0,
) -> None:
    """Print each service's readiness, the broker, the database, the live agents and the lag per
    consumer group.

    Reads the same DISCO_* settings as `disco dev up` (DISCO_<NAME>_URL,
    DISCO_KAFKA_BOOTSTRAP, DISCO_DATABASE_URL to look at another stack).
    Exits 1 when a component is down.
    """
    import asyncio
    from datetime import UTC, datetime

    from rich.console import Console
    from rich.table import Table

    from disco._dev.settings import DevSettings
    from disco._dev.status import collect_status

    report = asyncio.run(collect_status(DevSettings(), timeout=timeout))
    console = Console()
    health = Table(title="disco status", title_justify="left")
    for column in ("component", "state", "latency", "detail"):
        health.add_column(column)
    parts = [*report.services, report.broker, report.database]
    for part in parts:
        if part is None:
            continue
        state = "[green]up[/green]" if part.ok else "[red]down[/red]"
        latency = f"{part.latency_ms:.0f} ms" if part.latency_ms is not None else "-"
        health.add_row(part.name, state, latency, part.detail)
    console.print(health)
    if report.agents:
        agents = Table(title=f"live agents of tenant {report.agents_tenant}", title_justify="left")
        for column in ("agent", "instances", "last heard", "partitions"):
            agents.add_column(column)
        now = datetime.now(UTC)
        for line in report.agents:
            heard = max(0.0, (now - line.last_heard).total_seconds())
            partitions = "ok"
            if line.no_partitions_since is not None:
                idle = max(0.0, (now - line.no_partitions_since).total_seconds())
                partitions = (
                    f"[yellow]none in {line.without_partitions} of {line.instances} "
                    f"instance(s), for {idle:.0f} s[/yellow]"
                )
            agents.add_row(line.name, str(line.instances), f"{heard:.0f} s ago", partitions)
        console.print(agents)
    elif report.agents is not None:
        console.print(f"live agents of tenant {report.agents_tenant}: none")
    elif report.agents_error is not None:
        console.print(f"live agents: unavailable ({report.agents_error})")
    if report.groups_error is not None:
        console.print(f"consumer lag: unavailable ({report.groups_error})")
    elif report.broker is not None and report.broker.ok:
        lag = Table(title="consumer lag per group", title_justify="left")
        for column in ("group", "lag", "partitions", "by topic"):
            lag.add_column(column)
        for group in report.groups:
            topics = ", ".join(f"{t}={n}" for t, n in group.lag_by_topic.items())
            lag.add_row(group.group, str(group.total), str(group.partitions), topics)
        if not report.groups:
            console.print("consumer lag: no consumer group has committed offsets yet")
        else:
            console.print(lag)
    if not report.healthy:
        raise typer.Exit(1)
