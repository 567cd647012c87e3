"""disco.auth: its public names are pinned, and the tokens it mints carry the claims asked for."""

from __future__ import annotations

import jwt
import pytest

import disco.auth
import disco.clients
from disco.auth import (
    DEV_AUTH_ALGORITHM,
    DEV_AUTH_SECRET,
    DevTokenMinter,
    Role,
    StaticToken,
    TokenClaims,
    mint_dev_token,
)


def test_disco_auth_exports_exactly_what_agents_need_of_tokens() -> None:
    assert sorted(disco.auth.__all__) == [
        "DEV_AUTH_ALGORITHM",
        "DEV_AUTH_SECRET",
        "DevTokenMinter",
        "Role",
        "StaticToken",
        "TokenClaims",
        "TokenProvider",
        "mint_dev_token",
    ]
    assert all(hasattr(disco.auth, name) for name in disco.auth.__all__)


def test_the_token_providers_are_still_exported_from_disco_clients() -> None:
    assert disco.clients.StaticToken is StaticToken
    assert disco.clients.DevTokenMinter is DevTokenMinter
    assert disco.clients.TokenProvider is disco.auth.TokenProvider


def test_a_minted_dev_token_carries_the_tenant_user_and_roles() -> None:
    token = mint_dev_token(DEV_AUTH_SECRET, "acme", "alice", [Role.ADMIN], ttl_seconds=60)

    claims = TokenClaims.model_validate(
        jwt.decode(token, DEV_AUTH_SECRET, algorithms=[DEV_AUTH_ALGORITHM])
    )
    assert (claims.tenant_id, claims.user_id, claims.sub) == ("acme", "alice", "alice")
    assert claims.roles == [Role.ADMIN]
    assert claims.exp - claims.iat == 60


async def test_the_dev_minter_reuses_its_token_until_it_is_due_for_renewal() -> None:
    minter = DevTokenMinter(DEV_AUTH_SECRET, tenant_id="acme", user_id="agent")

    first, second = await minter.token(), await minter.token()

    assert first == second
    claims = jwt.decode(first, DEV_AUTH_SECRET, algorithms=[DEV_AUTH_ALGORITHM])
    assert claims["roles"] == [Role.SERVICE.value]


def test_minting_with_an_unknown_role_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known roles"):
        mint_dev_token(DEV_AUTH_SECRET, "acme", "alice", ["root"])
