"""Tenant credentials: what a producer signs with and what a consumer accepts (no broker)."""

from __future__ import annotations

import asyncio
import time
import warnings

import jwt
import pytest
from jwt.warnings import InsecureKeyLengthWarning

from disco.auth import DEV_AUTH_SECRET, DevTokenMinter, StaticToken, mint_dev_token
from disco.bus import (
    CredentialError,
    CredentialSigner,
    CredentialVerifier,
    TenantGuard,
    signing_with,
    tenant_guard,
)
from disco.settings import BusSettings
from disco_common.auth import TENANT_CREDENTIAL_HEADER, Role

SECRET = "a-test-secret-that-is-long-enough-0123456789"


def _headers(token: str | None) -> list[tuple[str, bytes]]:
    headers = [("ce_type", b"thing.happened"), ("ce_tenantid", b"acme")]
    if token is not None:
        headers.append((TENANT_CREDENTIAL_HEADER, token.encode()))
    return headers


def _guard() -> TenantGuard:
    return TenantGuard(CredentialVerifier(BusSettings(auth_secret=SECRET, auth_leeway_seconds=0)))


def test_credentials_are_required_outside_dev_unless_the_setting_says_otherwise() -> None:
    assert BusSettings(env="dev").tenant_credential_required is False
    assert BusSettings(env="production", auth_secret=SECRET).tenant_credential_required is True
    assert BusSettings(env="dev", bus_require_tenant_credential=True).tenant_credential_required
    assert tenant_guard(BusSettings(env="dev")) is None
    assert isinstance(
        tenant_guard(BusSettings(env="dev", bus_require_tenant_credential=True)), TenantGuard
    )


async def test_a_user_credential_vouches_for_its_own_tenant_only() -> None:
    guard = _guard()
    token = mint_dev_token(SECRET, "acme", "alice")

    assert await guard.refusal("acme", _headers(token)) is None
    refused = await guard.refusal("globex", _headers(token))
    assert refused is not None
    assert "'acme', not 'globex'" in refused


async def test_a_service_credential_vouches_for_any_tenant() -> None:
    token = mint_dev_token(SECRET, "platform", "router", roles=[Role.SERVICE])

    assert await _guard().refusal("globex", _headers(token)) is None


def _hs512_with_the_right_secret() -> str:
    claims = {"sub": "a", "tenant_id": "acme", "user_id": "a", "exp": int(time.time()) + 60}
    with warnings.catch_warnings():
        # The secret is shorter than SHA-512 would want: the point is that it is ours.
        warnings.simplefilter("ignore", InsecureKeyLengthWarning)
        return jwt.encode(claims, SECRET, "HS512")


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (None, "no disco-tenant-credential header"),
        (mint_dev_token("another-secret-that-is-long-enough-000", "acme", "alice"), "refused"),
        ("not-a-jwt", "malformed"),
        (jwt.encode({"sub": "x", "tenant_id": "acme", "user_id": "x"}, None, "none"), "none"),
        (
            jwt.encode(
                {"sub": "a", "tenant_id": "acme", "user_id": "a", "exp": int(time.time()) - 60},
                SECRET,
                "HS256",
            ),
            "expired",
        ),
        (_hs512_with_the_right_secret(), "HS512 are not accepted"),
    ],
    ids=["missing", "wrong-secret", "garbage", "alg-none", "expired", "hs512-right-secret"],
)
async def test_an_envelope_without_a_valid_credential_is_refused_with_the_reason(
    token: str | None, why: str
) -> None:
    refused = await _guard().refusal("acme", _headers(token))

    assert refused is not None
    assert why in refused


async def test_only_the_configured_algorithms_are_accepted() -> None:
    claims = {"sub": "a", "tenant_id": "acme", "user_id": "a", "exp": int(time.time()) + 60}
    secret = SECRET * 2  # long enough for SHA-512 (RFC 7518 3.2)
    hs512 = jwt.encode(claims, secret, "HS512")
    hs256 = jwt.encode(claims, secret, "HS256")
    verifier = CredentialVerifier(BusSettings(auth_secret=secret, auth_algorithms="HS512"))

    assert (await verifier.verify(hs512)).tenant_id == "acme"
    with pytest.raises(CredentialError, match="HS256 are not accepted"):
        await verifier.verify(hs256)


def test_an_unknown_algorithm_in_the_settings_is_refused() -> None:
    with pytest.raises(ValueError, match="auth_algorithms"):
        BusSettings(auth_algorithms="HS256,HS1024")


async def test_a_credential_is_verified_once_and_then_remembered_until_it_expires() -> None:
    verifier = CredentialVerifier(BusSettings(auth_secret=SECRET, auth_leeway_seconds=0))
    token = mint_dev_token(SECRET, "acme", "alice", ttl_seconds=600)

    first = await verifier.verify(token)
    # The same object back: no second decode.
    assert await verifier.verify(token) is first


async def test_an_expired_credential_is_not_served_from_memory() -> None:
    verifier = CredentialVerifier(BusSettings(auth_secret=SECRET, auth_leeway_seconds=0))
    token = jwt.encode(
        {"sub": "a", "tenant_id": "acme", "user_id": "a", "exp": int(time.time()) + 1},
        SECRET,
        "HS256",
    )
    await verifier.verify(token)
    expires = time.time() + 1
    while time.time() <= expires:  # until the clock passed its expiry
        await asyncio.sleep(0.05)

    with pytest.raises(CredentialError, match="expired"):
        await verifier.verify(token)


async def test_the_signer_reuses_its_token_and_the_signing_with_credential_wins() -> None:
    minter = DevTokenMinter(SECRET, tenant_id="acme", user_id="agent", ttl_seconds=600)
    signer = CredentialSigner(minter)

    name, first = await signer.header()
    assert name == TENANT_CREDENTIAL_HEADER
    assert (await signer.header())[1] is first
    with signing_with("callers-token"):
        assert await signer.header() == (TENANT_CREDENTIAL_HEADER, b"callers-token")
    assert (await signer.header())[1] is first


async def test_the_header_in_hand_is_given_without_awaiting_until_a_new_token_is_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    minter = DevTokenMinter(SECRET, tenant_id="acme", user_id="agent", ttl_seconds=600)
    signer = CredentialSigner(minter)
    assert signer.header_now() is None  # nothing minted yet: the caller awaits header()

    header = await signer.header()
    assert signer.header_now() is header
    with signing_with("callers-token"):
        assert signer.header_now() == (TENANT_CREDENTIAL_HEADER, b"callers-token")

    # Past the renewal point the minter has a new token to give: no stale header.
    renew_at = time.monotonic() + 600 * 0.8 + 1
    monkeypatch.setattr("disco.auth.time.monotonic", lambda: renew_at)
    assert signer.header_now() is None
    renewed = await signer.header()  # minted again (same claims within one second)
    assert renewed[0] == TENANT_CREDENTIAL_HEADER
    assert signer.header_now() is renewed


async def test_a_provider_of_its_own_is_always_awaited() -> None:
    class Rotating:
        def __init__(self) -> None:
            self.calls = 0

        async def token(self) -> str:
            self.calls += 1
            return f"token-{self.calls}"

    signer = CredentialSigner(Rotating())
    await signer.header()
    assert signer.header_now() is None
    assert await signer.header() == (TENANT_CREDENTIAL_HEADER, b"token-2")


async def test_the_configured_identity_signs_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCO_TENANT_ID", "acme")
    monkeypatch.delenv("DISCO_AUTH_TOKEN", raising=False)
    signer = CredentialSigner.from_settings(BusSettings(env="dev"))
    assert signer is not None

    _, token = await signer.header()
    claims = await CredentialVerifier(BusSettings(env="dev")).verify(token.decode())
    assert claims.tenant_id == "acme"
    assert claims.exp is not None
    assert claims.exp - time.time() <= BusSettings().bus_credential_ttl_seconds
    assert jwt.decode(token, DEV_AUTH_SECRET, algorithms=["HS256"])["tenant_id"] == "acme"


async def test_an_operator_token_is_used_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCO_AUTH_TOKEN", "issued-token")
    signer = CredentialSigner.from_settings(BusSettings(env="production", auth_secret=SECRET))
    assert signer is not None
    assert await signer.header() == (TENANT_CREDENTIAL_HEADER, b"issued-token")
    assert await CredentialSigner(StaticToken("x")).header() == (TENANT_CREDENTIAL_HEADER, b"x")


def test_without_a_token_or_a_secret_outside_dev_nothing_signs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DISCO_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("DISCO_AUTH_SECRET", raising=False)
    settings = BusSettings(env="production", auth_jwks_url="https://idp.example/jwks")
    assert CredentialSigner.from_settings(settings) is None
