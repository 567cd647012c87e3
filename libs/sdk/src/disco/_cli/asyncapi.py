"""``disco asyncapi``: the AsyncAPI 3.0 document of the bus, written out or checked.

Reads the registry with :class:`~disco.clients.RegistryClient`; the URL and the
token come from the ``DISCO_*`` settings (``DISCO_REGISTRY_URL``, and in dev a
token minted for ``DISCO_TENANT_ID``), or ``--url`` / ``--tenant``.

Exit codes: 0 done (``--check``: no breaking change), 1 a breaking change
(``--check``), 2 the document could not be read or fetched.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from disco.asyncapi import (
    BusDiff,
    BusDocument,
    FetchedDocument,
    MessageChange,
    compare_documents,
    parse_document,
)
from disco.clients import RegistryClient, ServiceClientSettings, ServiceError
from disco_common.asyncapi import AsyncApiFormat

__all__ = ["asyncapi"]

EXIT_BREAKING = 1
EXIT_ERROR = 2


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(EXIT_ERROR)


def _fetch(
    url: str | None,
    tenant: str | None,
    *,
    agent: str | None,
    event_type: str | None,
    form: AsyncApiFormat,
) -> FetchedDocument:
    overrides: dict[str, Any] = {}
    if url is not None:
        overrides["registry_url"] = url
    if tenant is not None:
        overrides["tenant_id"] = tenant

    async def main() -> FetchedDocument | None:
        async with RegistryClient.from_settings(ServiceClientSettings(**overrides)) as client:
            return await client.asyncapi(agent=agent, event_type=event_type, format=form)

    try:
        fetched = asyncio.run(main())
    except ServiceError as exc:
        raise _fail(f"{exc.message} ({exc.code})") from None
    except ValueError as exc:  # a name that is not one, refused before anything is sent
        raise _fail(str(exc)) from None
    if fetched is None:  # pragma: no cover - no If-None-Match was sent
        raise _fail("the registry answered 304 to a plain request")
    return fetched


def _where(change: MessageChange) -> str:
    return f" ({', '.join(change.topics)})" if change.topics else ""


def _report(diff: BusDiff, saved_name: str) -> None:
    if not diff.messages:
        typer.echo(f"{saved_name} matches the live bus.")
        return
    for change in diff.messages:
        mark = {"added": "+", "removed": "-", "changed": "~"}[change.kind]
        line = f"{mark} {change.kind:<8} {change.event_type}{_where(change)}"
        if change.kind == "changed" and change.schema_before != change.schema_after:
            line += f": {change.schema_before} → {change.schema_after}"
        typer.secho(line, fg=typer.colors.RED if change.breaking else None, bold=change.breaking)
        for found in change.changes:
            if change.kind == "removed":
                typer.echo(f"      BREAKING for {found.breaks}: {found.message}")
                continue
            where = f"{found.path}: " if found.path else ""
            verdict = f"BREAKING for {found.breaks}" if found.breaking else "compatible"
            typer.echo(f"      {verdict}: {where}{found.message}")
    breaking = diff.breaking
    counts = ", ".join(
        f"{len(diff.of(kind))} {kind}" for kind in ("added", "removed", "changed") if diff.of(kind)
    )
    if breaking:
        names = ", ".join(change.event_type for change in breaking)
        typer.secho(
            f"{len(breaking)} breaking ({names}); {counts}: agents built against "
            f"{saved_name} would fail.",
            fg=typer.colors.RED,
            err=True,
        )
    else:
        typer.echo(f"No breaking change ({counts}).")


def asyncapi(
    agent: Annotated[
        str | None,
        typer.Option("--agent", "-a", help="Only this agent's operations and what they use."),
    ] = None,
    event_type: Annotated[
        str | None,
        typer.Option("--event-type", "-e", help="Only this event type and who uses it."),
    ] = None,
    yaml: Annotated[bool, typer.Option("--yaml", help="Write YAML instead of JSON.")] = False,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the document to FILE (default: stdout)."),
    ] = None,
    check: Annotated[
        Path | None,
        typer.Option(
            "--check",
            metavar="FILE",
            help="Compare a saved document with the live bus; exit 1 on a breaking change.",
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option("--url", help="The registry's URL (default: DISCO_REGISTRY_URL)."),
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", "-t", help="Dev: act as this tenant (default: DISCO_TENANT_ID)."),
    ] = None,
) -> None:
    """Write the AsyncAPI 3.0 document of your bus, or check a saved one against it.

    The document comes from the registry and says what is registered now: topics,
    event types with their payload schemas, and who sends and receives each. Open
    it in AsyncAPI Studio or feed it to the AsyncAPI CLI's generators.

    With --check FILE, the live document (narrowed as FILE was, unless --agent or
    --event-type say otherwise) is compared with FILE: event types added, removed
    and changed, and every schema change that breaks senders or receivers built
    against FILE. Exit code 1 when one does, 0 when none does, 2 on an error.
    """
    if check is None:
        fetched = _fetch(
            url,
            tenant,
            agent=agent,
            event_type=event_type,
            form=AsyncApiFormat.YAML if yaml else AsyncApiFormat.JSON,
        )
        if output is None:
            typer.echo(fetched.content.decode().rstrip("\n"))
            return
        output.write_bytes(fetched.content)
        document = BusDocument(fetched.as_dict())
        typer.echo(
            f"wrote {output}: {len(document.messages)} event types, {len(document.agents)} "
            f"agents of tenant {document.tenant} (ETag {fetched.etag})",
            err=True,
        )
        return
    if output is not None or yaml:
        raise _fail("--check compares documents: it takes neither --output nor --yaml")
    try:
        saved = BusDocument(parse_document(check.read_bytes()))
    except OSError as exc:
        raise _fail(f"cannot read {check}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise _fail(f"{check} is not an AsyncAPI document: {exc}") from None
    if agent is None and event_type is None:
        agent, event_type = saved.agent_filter, saved.event_type_filter
    fetched = _fetch(url, tenant, agent=agent, event_type=event_type, form=AsyncApiFormat.JSON)
    live = BusDocument(fetched.as_dict())
    if saved.tenant is not None and live.tenant is not None and saved.tenant != live.tenant:
        typer.secho(
            f"note: {check} describes tenant {saved.tenant}, the live bus is tenant {live.tenant}",
            err=True,
            fg=typer.colors.YELLOW,
        )
    diff = compare_documents(saved, live)
    _report(diff, str(check))
    if diff.breaking:
        raise typer.Exit(EXIT_BREAKING)
