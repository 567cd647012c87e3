"""`disco token`: a dev token the services accept; a malformed tenant is refused briefly."""

from __future__ import annotations

import jwt
from typer.testing import CliRunner

from disco._cli.main import app
from disco.auth import DEV_AUTH_SECRET


def test_token_prints_a_token_the_services_accept() -> None:
    result = CliRunner().invoke(
        app, ["token", "--tenant", "acme", "--user", "alice", "--role", "admin"]
    )

    assert result.exit_code == 0, result.output
    claims = jwt.decode(result.stdout.strip(), DEV_AUTH_SECRET, algorithms=["HS256"])
    assert (claims["tenant_id"], claims["user_id"], claims["roles"]) == ("acme", "alice", ["admin"])


def test_token_rejects_a_malformed_tenant_with_a_short_message() -> None:
    result = CliRunner().invoke(app, ["token", "--tenant", "not a tenant", "--user", "alice"])

    assert result.exit_code != 0
    assert "tenant_id" in result.stderr
