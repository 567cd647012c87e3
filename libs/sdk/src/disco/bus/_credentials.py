"""Tenant credentials on the bus: who vouches for an envelope's tenant.

A producer attaches a short-lived JWT of the HTTP tokens' issuer (claims
:class:`~disco_common.auth.TokenClaims`) in the ``disco-tenant-credential``
header; consumers verify it and refuse an envelope whose tenant it does not
cover (:meth:`TokenClaims.vouches_for`) when ``bus_require_tenant_credential``
is on (the default outside dev).

- :class:`CredentialSigner`: the header a :class:`~disco.bus.BusClient` adds to
  every record, from the agent's configured identity (``DISCO_AUTH_TOKEN``, or
  minted from ``DISCO_AUTH_SECRET`` and renewed before it expires), or the
  credential :func:`signing_with` put in place (the gateway: its caller's token).
- :class:`CredentialVerifier`: checks a credential once and remembers the claims
  until it expires, so a consumer pays one signature check per distinct
  credential, not per envelope. The HTTP services verify their bearer tokens with
  the same code.
- :class:`TenantGuard`: the consumer-side rule; :func:`tenant_guard` builds one
  when the settings require credentials.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import jwt
import structlog
from pydantic import ValidationError

from disco.auth import DevTokenMinter, StaticToken, TokenProvider
from disco.settings import BusSettings, ServiceClientSettings
from disco_common.auth import TENANT_CREDENTIAL_HEADER, TokenClaims

__all__ = [
    "CredentialError",
    "CredentialSigner",
    "CredentialVerifier",
    "TenantGuard",
    "sign_as",
    "signing_with",
    "tenant_guard",
]

_log = structlog.get_logger("disco.bus")

_HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
_ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
_signing_override: ContextVar[str | None] = ContextVar("disco_bus_credential", default=None)


class CredentialError(Exception):
    """A token or credential is not valid. ``reason`` says why.

    ``unavailable`` is True when the key set could not be fetched (try later),
    as opposed to a token that is bad.
    """

    def __init__(self, reason: str, *, unavailable: bool = False, details: Any = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.unavailable = unavailable
        self.details = details


def sign_as(credential: str | None) -> None:
    """Sign what the current task (and the tasks it starts) publishes from now on with
    ``credential``: :func:`signing_with` for the rest of a request.

    The services call it when they authenticate a request (``disco_service.identify``),
    so that whatever the request publishes is vouched for by the caller's own
    token, carrying the caller's tenant.
    """
    _signing_override.set(credential)


@contextmanager
def signing_with(credential: str | None) -> Iterator[None]:
    """Sign what is published inside the block with ``credential`` instead of the
    client's own identity.

    For a service that publishes on behalf of an authenticated caller (the
    gateway's publish bridge, A2A and session routes): the envelope is then
    vouched for by the caller's own token, carrying the caller's tenant.
    ``None`` keeps the client's identity.
    """
    token = _signing_override.set(credential)
    try:
        yield
    finally:
        _signing_override.reset(token)


class CredentialSigner:
    """Supplies the ``disco-tenant-credential`` header of outgoing records.

    Args:
        tokens: the producer's identity; its tokens are cached and renewed by the
            provider (:class:`~disco.auth.DevTokenMinter` renews with a fifth of
            the lifetime left), so signing is not a per-message cost.
    """

    def __init__(self, tokens: TokenProvider) -> None:
        self._tokens = tokens
        self._last: tuple[str, tuple[str, bytes]] | None = None
        # Providers that can tell their token without awaiting (the per-message path).
        self._current = tokens.current if isinstance(tokens, StaticToken | DevTokenMinter) else None

    @classmethod
    def from_settings(
        cls, settings: BusSettings, identity: ServiceClientSettings | None = None
    ) -> CredentialSigner | None:
        """The signer of the configured identity: ``DISCO_AUTH_TOKEN`` as is, else tokens
        minted with the HS256 secret for ``DISCO_TENANT_ID``/``DISCO_USER_ID`` with
        ``DISCO_AGENT_ROLES``; None when neither is available (JWKS-only without a token).

        Args:
            settings: the bus settings (secret, credential lifetime).
            identity: who the agent is (default: read from ``DISCO_*`` variables).
        """
        if identity is None:
            identity = ServiceClientSettings()
        if identity.auth_token is not None and identity.auth_token.get_secret_value():
            return cls(StaticToken(identity.auth_token.get_secret_value()))
        secret = settings.hs256_secret()
        if secret is None and identity.auth_secret is not None:
            secret = identity.auth_secret.get_secret_value()
        if secret is None:
            return None
        return cls(
            DevTokenMinter(
                secret,
                tenant_id=identity.tenant_id,
                user_id=identity.user_id,
                roles=identity.agent_roles,
                ttl_seconds=settings.bus_credential_ttl_seconds,
            )
        )

    def header_now(self) -> tuple[str, bytes] | None:
        """:meth:`header` when it needs no awaiting (the token in hand is still good),
        else None."""
        override = _signing_override.get()
        if override is not None:
            return (TENANT_CREDENTIAL_HEADER, override.encode())
        last = self._last
        if last is None or self._current is None or self._current() != last[0]:
            return None
        return last[1]

    async def header(self) -> tuple[str, bytes]:
        """The header to attach now (the :func:`signing_with` credential wins)."""
        override = override_header()
        if override is not None:
            return override
        token = await self._tokens.token()
        last = self._last
        if last is not None and last[0] == token:
            return last[1]
        header = (TENANT_CREDENTIAL_HEADER, token.encode())
        self._last = (token, header)
        return header


def override_header() -> tuple[str, bytes] | None:
    """The :func:`signing_with` credential as a header, for a client without a signer."""
    token = _signing_override.get()
    return None if token is None else (TENANT_CREDENTIAL_HEADER, token.encode())


class CredentialVerifier:
    """Verifies tokens of the configured issuer and remembers them until they expire.

    Only the algorithms of ``DISCO_AUTH_ALGORITHMS`` are accepted (default HS256,
    RS256, ES256). HMAC tokens are verified with the secret (``DISCO_AUTH_SECRET``;
    the dev default in dev), asymmetric ones with the keys of
    ``DISCO_AUTH_JWKS_URL``; the algorithm in the token header picks which, and
    each key only verifies its own kind (a public key is never used as an HMAC
    secret). ``exp`` and
    ``sub`` are required; ``iss``/``aud`` are checked when configured.

    Args:
        settings: the ``auth_*`` settings.
        remember_seconds: the longest a verified token is reused without checking
            its signature again (never past its expiry); None: until it expires.
        capacity: how many verified tokens are remembered (the oldest go first).
    """

    def __init__(
        self,
        settings: BusSettings,
        *,
        remember_seconds: float | None = None,
        capacity: int | None = None,
    ) -> None:
        self._secret = settings.hs256_secret()
        self._algorithms: frozenset[str] = frozenset(settings.auth_algorithms)
        self._audience = settings.auth_audience
        self._issuer = settings.auth_issuer
        self._leeway = settings.auth_leeway_seconds
        self._remember = remember_seconds
        self._capacity = capacity if capacity is not None else settings.bus_credential_cache_size
        self._verified: dict[str, tuple[TokenClaims, float]] = {}
        self._jwks: jwt.PyJWKClient | None = None
        if settings.auth_jwks_url:
            self._jwks = jwt.PyJWKClient(
                settings.auth_jwks_url,
                cache_keys=True,
                cache_jwk_set=True,
                lifespan=settings.auth_jwks_cache_seconds,
                timeout=5,
            )

    async def verify(self, token: str) -> TokenClaims:
        """The verified claims of ``token``; failures are never remembered.

        Raises:
            CredentialError: the token is malformed, expired, signed with an
                unknown key or algorithm, or its claims are not disco claims
                (``unavailable``: the JWKS endpoint could not be reached).
        """
        now = time.monotonic()
        remembered = self._verified.get(token)
        if remembered is not None:
            claims, valid_until = remembered
            if now < valid_until:
                return claims
            del self._verified[token]
        claims = await self._verify_uncached(token)
        lifetime = float("inf") if self._remember is None else self._remember
        if claims.exp is not None:
            lifetime = min(lifetime, claims.exp + self._leeway - time.time())
        if 0 < lifetime < float("inf"):
            if len(self._verified) >= self._capacity:
                # Dicts keep insertion order: drop the oldest entry.
                del self._verified[next(iter(self._verified))]
            self._verified[token] = (claims, now + lifetime)
        return claims

    async def _verify_uncached(self, token: str) -> TokenClaims:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise CredentialError("the token is malformed") from None
        algorithm = str(header.get("alg", ""))
        key: Any
        if algorithm not in self._algorithms:
            raise CredentialError(
                f"tokens signed with {algorithm or 'no algorithm'} are not accepted here "
                f"(DISCO_AUTH_ALGORITHMS: {', '.join(sorted(self._algorithms))})"
            )
        if algorithm in _HMAC_ALGORITHMS and self._secret is not None:
            key = self._secret
        elif algorithm in _ASYMMETRIC_ALGORITHMS and self._jwks is not None:
            key = await self._signing_key(token)
        else:
            raise CredentialError(
                f"tokens signed with {algorithm or 'no algorithm'} are not accepted here"
            )
        try:
            payload = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway,
                options={
                    "require": ["exp", "sub"],
                    # Without a configured audience, an `aud` claim is not ours to check.
                    "verify_aud": self._audience is not None,
                },
            )
        except jwt.ExpiredSignatureError:
            raise CredentialError("the token has expired") from None
        except jwt.InvalidTokenError as exc:
            raise CredentialError(f"the token is not valid: {exc}") from None
        try:
            return TokenClaims.model_validate(payload)
        except ValidationError as exc:
            raise CredentialError(
                "the token's claims are not disco claims (sub, tenant_id, user_id, roles)",
                details=[
                    f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"
                    for error in exc.errors()
                ],
            ) from None

    async def _signing_key(self, token: str) -> Any:
        assert self._jwks is not None
        try:
            # PyJWKClient fetches with urllib; keep that off the event loop.
            signing_key = await asyncio.to_thread(self._jwks.get_signing_key_from_jwt, token)
        except jwt.PyJWKClientConnectionError:
            raise CredentialError(
                "the identity provider's key set cannot be fetched right now", unavailable=True
            ) from None
        except (jwt.PyJWKClientError, jwt.InvalidTokenError) as exc:
            raise CredentialError(f"the token's signing key is unknown: {exc}") from None
        return signing_key.key


class TenantGuard:
    """The consumer-side rule: a valid credential must vouch for the envelope's tenant."""

    def __init__(self, verifier: CredentialVerifier) -> None:
        self.verifier = verifier

    async def refusal(
        self, tenant_id: str | None, headers: Sequence[tuple[str, bytes | None]]
    ) -> str | None:
        """Why an envelope of ``tenant_id`` with record ``headers`` is refused; None if vouched.

        While the identity provider's key set cannot be fetched, it waits and
        retries (with backoff, until cancelled): a good envelope is never
        dead-lettered for an outage.
        """
        credential: bytes | None = None
        for name, value in headers:
            if name == TENANT_CREDENTIAL_HEADER:
                credential = value
        who = f"tenant {tenant_id!r}" if tenant_id is not None else "an envelope without a tenant"
        if not credential:
            return f"no {TENANT_CREDENTIAL_HEADER} header vouches for {who}"
        token = credential.decode("utf-8", "replace")
        delay = 0.5
        while True:
            try:
                claims = await self.verifier.verify(token)
            except CredentialError as exc:
                if not exc.unavailable:
                    return f"the {TENANT_CREDENTIAL_HEADER} for {who} is refused: {exc.reason}"
                _log.warning("cannot verify a tenant credential yet", error=exc.reason)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            break
        if not claims.vouches_for(tenant_id):
            return (
                f"the {TENANT_CREDENTIAL_HEADER} of {claims.sub!r} is for tenant "
                f"{claims.tenant_id!r}, not {tenant_id!r}"
            )
        return None


def tenant_guard(settings: BusSettings) -> TenantGuard | None:
    """The guard consumers of these settings apply, or None when credentials are not
    required (``bus_require_tenant_credential``; off in dev by default)."""
    if not settings.tenant_credential_required:
        return None
    if settings.hs256_secret() is None and not settings.auth_jwks_url:
        _log.warning(
            "tenant credentials are required but no DISCO_AUTH_SECRET or DISCO_AUTH_JWKS_URL "
            "is set to verify them: every envelope will be refused"
        )
    return TenantGuard(CredentialVerifier(settings))
