"""``disco dev``: the local stack."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from disco._debug import debug_enabled
from disco._dev.errors import DevStackError
from disco_common.services import ServiceManifest

if TYPE_CHECKING:
    from disco._dev.progress import Steps
    from disco._dev.settings import DevSettings
    from disco._dev.stack import DevStack, StackState

app = typer.Typer(
    help="Run the whole disco stack locally (embedded Postgres and Kafka).", no_args_is_help=True
)


def _services(names: list[str] | None, no_services: bool) -> list[ServiceManifest]:
    from disco._dev.services import select_services

    if no_services:
        return []
    try:
        return select_services(names or None)
    except DevStackError as exc:
        raise typer.BadParameter(str(exc)) from exc


@app.command()
def up(
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Leave the stack running and return.")
    ] = False,
    service: Annotated[
        list[str] | None,
        typer.Option("--service", "-s", help="Start only these services (repeatable)."),
    ] = None,
    no_services: Annotated[
        bool, typer.Option("--no-services", help="Start Postgres and Kafka only (and migrate).")
    ] = False,
) -> None:
    """Start Postgres, Kafka, migrations and the installed services; Ctrl-C stops them."""
    from rich.console import Console

    from disco._dev.progress import Steps
    from disco._dev.settings import DevSettings
    from disco._dev.stack import DevStack

    settings = DevSettings()
    steps = Steps(typer.echo, Console(stderr=True))
    stack = DevStack(
        settings, services=_services(service, no_services), echo=typer.echo, steps=steps
    )
    # From here until the stack is stopped again, Ctrl-C and SIGTERM stop it, and
    # a second one cannot break off that stop (see disco._dev.signals).
    with stack.signals.caught():
        try:
            state = stack.up()
        except DevStackError as exc:
            if debug_enabled():
                raise
            typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(1) from exc
        except KeyboardInterrupt:
            typer.echo("interrupted: what had started is stopped again", err=True)
            raise typer.Exit(130) from None
        _print_banner(settings, stack, state, steps)
        if detach:
            typer.echo("Stop it with:  disco dev down")
            return
        typer.echo("Ctrl-C stops everything.\n")
        code = stack.wait()
    raise typer.Exit(code)


def _print_banner(settings: DevSettings, stack: DevStack, state: StackState, steps: Steps) -> None:
    from disco._dev.dburl import redact
    from disco._dev.stack import DEV_GRPC_PORT

    width = 10
    total = sum(seconds for _, seconds in steps.timings)
    typer.secho(f"\ndisco is up ({total:.1f}s)", fg=typer.colors.GREEN, bold=True)
    for record in state.services:
        extra = (
            "  (A2A agent card: /.well-known/agent-card.json)" if record.name == "gateway" else ""
        )
        typer.echo(f"  {record.name:<{width}} {record.url}   docs: {record.url}/docs{extra}")
        if record.name == "gateway":
            grpc_port = os.environ.get("DISCO_GATEWAY_GRPC_PORT") or str(DEV_GRPC_PORT)
            typer.echo(f"  {'':<{width}} 127.0.0.1:{grpc_port}   A2A over gRPC")
    prefix = settings.topic_prefix or "(none)"
    typer.echo(f"  {'kafka':<{width}} {settings.bootstrap()}   topic prefix: {prefix}")
    typer.echo(f"  {'postgres':<{width}} {redact(settings.app_url())}")
    typer.echo(f"  {'logs':<{width}} {stack.logs_dir}")
    typer.echo(
        "\nA token for the HTTP APIs and the console:  uv run disco token --tenant default "
        "--user you\n(`default` is the tenant `make demo` and the examples act for)"
    )


@app.command()
def down() -> None:
    """Stop a stack started with `disco dev up` (from its pid file)."""
    from disco._dev.settings import DevSettings
    from disco._dev.stack import stop_from_state

    settings = DevSettings()
    if not stop_from_state(settings.state_dir.resolve(), echo=typer.echo):
        typer.echo("no stack is running")
        return
    typer.echo("stopped")


@app.command()
def status() -> None:
    """Say which parts of the local stack run."""
    from disco._dev.settings import DevSettings
    from disco._dev.stack import status_lines

    for line in status_lines(DevSettings().state_dir.resolve()):
        typer.echo(line)
