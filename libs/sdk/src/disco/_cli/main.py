"""Entry point of the ``disco`` command."""

from __future__ import annotations

import typer

from disco._cli import db, dev, plans, sessions
from disco._cli.answer import answer
from disco._cli.ask import ask
from disco._cli.asyncapi import asyncapi
from disco._cli.new import new
from disco._cli.status import status
from disco._cli.tail import tail
from disco._cli.token import token

app = typer.Typer(
    name="disco",
    help="disco: an event-driven platform for multi-agent systems.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
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
    """Run the ``disco`` command."""
    app()


if __name__ == "__main__":
    main()
