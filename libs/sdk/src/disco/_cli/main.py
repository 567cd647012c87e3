"""Entry point of the ``disco`` command."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from disco._cli import db, dev, plans, sessions
from disco._cli.answer import answer
from disco._cli.ask import ask
from disco._cli.asyncapi import asyncapi
from disco._cli.new import new
from disco._cli.status import status
from disco._cli.tail import tail
from disco._cli.token import token
from disco._debug import DEBUG_HINT, debug_enabled, describe

app = typer.Typer(
    name="disco",
    help="disco: an event-driven platform for multi-agent systems.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


@app.callback()
def _options(
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="Show the traceback behind an error (as DISCO_DEBUG=1 does).",
        ),
    ] = False,
) -> None:
    if debug:
        os.environ["DISCO_DEBUG"] = "1"


app.add_typer(dev.app, name="dev")
app.add_typer(db.app, name="db")
app.add_typer(plans.app, name="plans")
app.add_typer(sessions.app, name="sessions")
app.command(name="token")(token)
app.command(name="tail")(tail)
app.command(name="ask")(ask)
app.command(name="answer")(answer)
app.command(name="new")(new)
app.command(name="status")(status)
app.command(name="asyncapi")(asyncapi)


def main() -> None:
    """Run the ``disco`` command.

    An error no command turned into a message of its own is printed as one
    line, exit status 1; ``--debug`` or ``DISCO_DEBUG=1`` shows its traceback.
    """
    try:
        app()
    except Exception as exc:
        if debug_enabled():
            raise
        typer.secho(f"error: {describe(exc)} {DEBUG_HINT}", fg=typer.colors.RED, err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
