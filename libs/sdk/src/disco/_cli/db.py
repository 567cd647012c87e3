"""``disco db``: the database schema."""

from __future__ import annotations

from typing import Annotated

import typer

from disco._dev.errors import DevStackError

app = typer.Typer(help="Manage the services' database schemas.", no_args_is_help=True)


@app.command()
def upgrade(
    service: Annotated[
        list[str] | None,
        typer.Option("--service", "-s", help="Migrate only these services (repeatable)."),
    ] = None,
) -> None:
    """Migrate every service's schema to its newest version.

    Runs as the owner in DISCO_DATABASE_ADMIN_URL and creates the application
    role named in DISCO_DATABASE_URL (without BYPASSRLS) if it is missing.
    """
    from disco._dev import migrate
    from disco._dev.dburl import redact
    from disco._dev.services import select_services
    from disco._dev.settings import DevSettings

    settings = DevSettings()
    try:
        names = [chosen.name for chosen in select_services(service or None)]
        migrate.upgrade(settings.admin_url(), settings.app_url(), services=names)
    except DevStackError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"migrated {', '.join(names)} at {redact(settings.admin_url())}")


@app.command()
def wait(
    service: Annotated[
        list[str] | None,
        typer.Option("--service", "-s", help="Wait only for these services (repeatable)."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait before failing.", min=0)] = 600.0,
) -> None:
    """Wait until the services' schemas are migrated to their newest version.

    Connects as the application role (DISCO_DATABASE_URL), so a service's pod
    can run it before the service starts while the migration step runs.
    """
    import asyncio

    from disco._dev.schema_wait import wait_for_migrations
    from disco._dev.settings import DevSettings

    settings = DevSettings()
    try:
        revisions = asyncio.run(
            wait_for_migrations(settings.app_url(), service or None, timeout=timeout)
        )
    except DevStackError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from exc
    typer.echo("migrated: " + ", ".join(f"{name} at {rev}" for name, rev in revisions.items()))
