"""Tokens and identities without any server: minting, verifying, on-behalf-of."""

from __future__ import annotations

import pytest

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco_common.auth import (
    ON_BEHALF_OF_TENANT_HEADER,
    ON_BEHALF_OF_USER_HEADER,
    Role,
    TokenClaims,
)
from disco_service import BadRequest, Identity, ServiceSettings, TokenVerifier, Unauthenticated


async def test_a_minted_dev_token_verifies_to_its_claims() -> None:
    verifier = TokenVerifier(ServiceSettings())
    token = mint_dev_token(DEV_AUTH_SECRET, "acme", "alice", [Role.USER, Role.ADMIN], 60)
    claims = await verifier.verify(token)
    assert (claims.tenant_id, claims.user_id, claims.sub) == ("acme", "alice", "alice")
    assert claims.roles == [Role.USER, Role.ADMIN]


async def test_a_token_with_the_wrong_issuer_is_refused() -> None:
    verifier = TokenVerifier(ServiceSettings(auth_issuer="https://idp.example"))
    token = mint_dev_token(DEV_AUTH_SECRET, "acme", "alice", issuer="https://evil.example")
    with pytest.raises(Unauthenticated):
        await verifier.verify(token)


def test_minting_refuses_an_unknown_role() -> None:
    with pytest.raises(ValueError, match="known roles"):
        mint_dev_token(DEV_AUTH_SECRET, "acme", "alice", ["superuser"])


def test_minting_refuses_a_tenant_the_services_would_reject() -> None:
    with pytest.raises(ValueError):
        mint_dev_token(DEV_AUTH_SECRET, "not a tenant", "alice")


def test_minting_refuses_a_non_positive_ttl() -> None:
    with pytest.raises(ValueError, match="ttl_seconds"):
        mint_dev_token(DEV_AUTH_SECRET, "acme", "alice", ttl_seconds=0)


def _claims(*roles: Role) -> TokenClaims:
    return TokenClaims(sub="svc", tenant_id="platform", user_id="svc", roles=list(roles))


def test_a_service_naming_only_a_tenant_keeps_its_own_user() -> None:
    identity = Identity.from_claims(
        _claims(Role.SERVICE),
        {ON_BEHALF_OF_TENANT_HEADER: "acme"},
    )
    assert (identity.tenant_id, identity.user_id, identity.on_behalf_of) == ("acme", "svc", True)


def test_a_user_naming_another_tenant_keeps_its_own() -> None:
    identity = Identity.from_claims(
        _claims(Role.USER, Role.ADMIN),
        {ON_BEHALF_OF_TENANT_HEADER: "acme", ON_BEHALF_OF_USER_HEADER: "bob"},
    )
    assert (identity.tenant_id, identity.user_id, identity.on_behalf_of) == (
        "platform",
        "svc",
        False,
    )


def test_a_service_naming_a_malformed_user_is_refused() -> None:
    with pytest.raises(BadRequest):
        Identity.from_claims(
            _claims(Role.SERVICE),
            {ON_BEHALF_OF_USER_HEADER: "no spaces allowed"},
        )
