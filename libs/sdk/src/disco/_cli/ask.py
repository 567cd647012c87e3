"""``disco ask EVENT_TYPE [DATA]``: send a request over the bus and print the answer."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

__all__ = ["ask", "default_response_event"]


def default_response_event(event_type: str) -> str:
    """The event an answer to ``event_type`` is published as, unless told otherwise:
    ``.requested`` (or any last part) replaced by ``.answered``."""
    base = event_type.removesuffix(".requested")
    return f"{base}.answered"


def ask(
    event_type: Annotated[
        str, typer.Argument(help="The request's event type, e.g. hello.requested.")
    ],
    data: Annotated[str, typer.Argument(help="The request's data, as JSON.")] = "{}",
    response_event: Annotated[
        str | None,
        typer.Option(
            "--response-event",
            "-r",
            help="The event type to answer with (default: EVENT_TYPE's .requested -> .answered).",
            show_default=False,
        ),
    ] = None,
    wait: Annotated[
        float, typer.Option("--wait", "-w", help="Seconds to wait for the answer.", min=0.1)
    ] = 60.0,
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant",
            "-t",
            help="The tenant the request is made for (default: DISCO_TENANT_ID).",
            show_default=False,
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", help="The session the request belongs to.", show_default=False),
    ] = None,
) -> None:
    """Send a request over the bus and print the answer's data as JSON.

    The agent that consumes EVENT_TYPE answers with the response event; this waits
    for it. Exit 1 when the answer is an error (``"success": false``; the error
    is said on stderr too), when none comes in time, or the broker cannot be reached.

    Reads the same DISCO_* settings as an agent (DISCO_KAFKA_BOOTSTRAP, DISCO_TOPIC_PREFIX).
    """
    import asyncio

    try:
        payload = json.loads(data)
    except json.JSONDecodeError as exc:
        typer.secho(f"error: DATA is not JSON: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    answering = response_event or default_response_event(event_type)
    answer = asyncio.run(_ask(event_type, payload, answering, wait, tenant, session))
    if answer is None:
        raise typer.Exit(1)
    typer.echo(json.dumps(answer, indent=2, ensure_ascii=False))
    failure = _failure(answer)
    if failure is not None:
        typer.secho(f"the agent answered with an error: {failure}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)


def _failure(answer: Any) -> str | None:
    """What an error answer (``{"success": false, "error": {...}}``) says, in one line."""
    if not isinstance(answer, dict) or answer.get("success") is not False:
        return None
    error = answer.get("error")
    if not isinstance(error, dict):
        return "no reason given"
    kind, message = error.get("type") or "error", " ".join(str(error.get("message", "")).split())
    return f"{kind}: {message}" if message else str(kind)


async def _ask(
    event_type: str,
    data: Any,
    response_event: str,
    wait: float,
    tenant: str | None,
    session: str | None,
) -> Any:
    """The answer's data, or None (said on stderr) when there is none."""
    from disco.bus import BusClient, BusUnavailableError, RequestTimeout
    from disco.clients import ServiceClientSettings
    from disco.settings import BusSettings

    tenant_id = tenant or ServiceClientSettings().tenant_id
    try:
        async with BusClient(BusSettings(), name="disco-ask") as bus:
            answer = await bus.request(
                event_type,
                data,
                response_event=response_event,
                wait=wait,
                tenant_id=tenant_id,
                session_id=session,
            )
    except RequestTimeout:
        typer.secho(
            f"no {response_event} came within {wait:g} s: is an agent consuming {event_type} "
            "running? (`disco tail` shows what passes)",
            fg=typer.colors.RED,
            err=True,
        )
        return None
    except BusUnavailableError as exc:
        typer.secho(str(exc), fg=typer.colors.RED, err=True)
        return None
    return answer.data
