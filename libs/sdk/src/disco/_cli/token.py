"""``disco token``: mint a dev bearer token for the HTTP APIs."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from pydantic import ValidationError

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco_common.auth import Role


def token(
    tenant: Annotated[str, typer.Option("--tenant", "-t", help="Tenant the token acts for.")],
    user: Annotated[str, typer.Option("--user", "-u", help="User the token acts as.")],
    role: Annotated[
        list[Role] | None,
        typer.Option("--role", "-r", help="Role(s): user (default), service, admin. Repeatable."),
    ] = None,
    ttl: Annotated[int, typer.Option("--ttl", help="Lifetime in seconds.", min=1)] = 3600,
    secret: Annotated[
        str | None,
        typer.Option(
            "--secret",
            envvar="DISCO_AUTH_SECRET",
            help="HS256 secret the services verify with (default: the dev secret).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print a signed dev token for the HTTP APIs.

    Use it as `curl -H "Authorization: Bearer $(disco token -t acme -u alice)" ...`.
    """
    try:
        value = mint_dev_token(
            secret or DEV_AUTH_SECRET,
            tenant,
            user,
            role or [Role.USER],
            ttl,
            issuer=os.environ.get("DISCO_AUTH_ISSUER"),
            audience=os.environ.get("DISCO_AUTH_AUDIENCE"),
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}" for error in exc.errors()
        )
        raise typer.BadParameter(problems) from exc
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    typer.echo(value)
