"""Bearer-token authentication and the caller's identity.

Tokens are JWTs with the claims of :class:`disco_common.auth.TokenClaims`.
HS256 tokens are verified with ``DISCO_AUTH_SECRET`` (dev), asymmetric ones
with the keys of ``DISCO_AUTH_JWKS_URL`` (production); the algorithm in the
token header picks which, and each key only ever verifies its own kind, so a
public key can never be used as an HMAC secret.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from pydantic import TypeAdapter, ValidationError

from disco_common.auth import (
    ON_BEHALF_OF_TENANT_HEADER,
    ON_BEHALF_OF_USER_HEADER,
    Role,
    TokenClaims,
)
from disco_common.ids import Id, TenantId
from disco_service._errors import BadRequest, ServiceUnavailable, Unauthenticated
from disco_service._settings import ServiceSettings

__all__ = ["Identity", "TokenVerifier"]

_HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
_ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
_TENANT = TypeAdapter(TenantId)
_USER = TypeAdapter(Id)

VERIFIED_TOKEN_SECONDS = 60
"""How long a verified token's claims are reused without checking the signature again."""
VERIFIED_TOKEN_CAPACITY = 10_000
"""How many verified tokens are remembered at most."""


@dataclass(frozen=True)
class Identity:
    """Who a request acts for: the tenant and user every query is scoped to.

    ``on_behalf_of`` is True when a caller with the ``service`` role named
    another tenant/user in the ``X-Disco-Tenant``/``X-Disco-User`` headers;
    ``sub`` and ``roles`` stay the caller's own.
    """

    tenant_id: str
    user_id: str
    sub: str
    roles: frozenset[Role]
    on_behalf_of: bool = False

    def has_role(self, role: Role) -> bool:
        """Whether the caller's token carries ``role``."""
        return role in self.roles

    @classmethod
    def from_claims(cls, claims: TokenClaims, headers: Mapping[str, str]) -> Identity:
        """The identity for verified ``claims``, applying the on-behalf-of rules.

        Only a ``service`` caller may act for another tenant/user; everyone
        else's ``X-Disco-*`` headers are ignored.

        Raises:
            BadRequest: a service caller sent a malformed tenant or user header.
        """
        roles = frozenset(claims.roles)
        tenant = headers.get(ON_BEHALF_OF_TENANT_HEADER)
        user = headers.get(ON_BEHALF_OF_USER_HEADER)
        if Role.SERVICE not in roles or (tenant is None and user is None):
            return cls(claims.tenant_id, claims.user_id, claims.sub, roles)
        try:
            tenant_id = _TENANT.validate_python(tenant) if tenant is not None else claims.tenant_id
            user_id = _USER.validate_python(user) if user is not None else claims.user_id
        except ValidationError as exc:
            raise BadRequest(
                f"{ON_BEHALF_OF_TENANT_HEADER}/{ON_BEHALF_OF_USER_HEADER} must be a valid "
                "tenant id and user id",
                details=[str(error["msg"]) for error in exc.errors()],
            ) from None
        return cls(tenant_id, user_id, claims.sub, roles, on_behalf_of=True)


class TokenVerifier:
    """Verifies bearer tokens with the service's settings.

    The JWKS client caches the key set (``DISCO_AUTH_JWKS_CACHE_SECONDS``) and
    refetches when a token names an unknown key id.
    """

    def __init__(self, settings: ServiceSettings) -> None:
        self._secret = settings.hs256_secret()
        self._audience = settings.auth_audience
        self._issuer = settings.auth_issuer
        self._leeway = settings.auth_leeway_seconds
        self._jwks: jwt.PyJWKClient | None = None
        self._verified: dict[str, tuple[TokenClaims, float]] = {}
        if settings.auth_jwks_url:
            self._jwks = jwt.PyJWKClient(
                settings.auth_jwks_url,
                cache_keys=True,
                cache_jwk_set=True,
                lifespan=settings.auth_jwks_cache_seconds,
                timeout=5,
            )

    async def verify(self, token: str) -> TokenClaims:
        """The verified claims of ``token`` (remembered for a short while).

        An agent sends the same token with every call, and checking a signature
        costs more than the rest of a small request, so verified claims are
        kept for up to :data:`VERIFIED_TOKEN_SECONDS` — never past the token's
        own expiry — in a bounded map. Failures are never remembered.

        Raises:
            Unauthenticated: the token is malformed, expired, signed with an
                unknown key or algorithm, or its claims are not disco claims.
            ServiceUnavailable: the JWKS endpoint could not be reached.
        """
        now = time.monotonic()
        remembered = self._verified.get(token)
        if remembered is not None:
            claims, valid_until = remembered
            if now < valid_until:
                return claims
            del self._verified[token]
        claims = await self._verify_uncached(token)
        lifetime = float(VERIFIED_TOKEN_SECONDS)
        if claims.exp is not None:
            lifetime = min(lifetime, claims.exp + self._leeway - time.time())
        if lifetime > 0:
            if len(self._verified) >= VERIFIED_TOKEN_CAPACITY:
                # Dicts keep insertion order: drop the oldest entry.
                del self._verified[next(iter(self._verified))]
            self._verified[token] = (claims, now + lifetime)
        return claims

    async def _verify_uncached(self, token: str) -> TokenClaims:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise Unauthenticated("The bearer token is malformed.", error="invalid_token") from None
        algorithm = str(header.get("alg", ""))
        key: Any
        if algorithm in _HMAC_ALGORITHMS and self._secret is not None:
            key = self._secret
        elif algorithm in _ASYMMETRIC_ALGORITHMS and self._jwks is not None:
            key = await self._signing_key(token)
        else:
            raise Unauthenticated(
                f"Tokens signed with {algorithm or 'no algorithm'} are not accepted here.",
                error="invalid_token",
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
            raise Unauthenticated("The bearer token has expired.", error="invalid_token") from None
        except jwt.InvalidTokenError as exc:
            raise Unauthenticated(
                f"The bearer token is not valid: {exc}.", error="invalid_token"
            ) from None
        try:
            return TokenClaims.model_validate(payload)
        except ValidationError as exc:
            raise Unauthenticated(
                "The bearer token's claims are not disco claims (sub, tenant_id, user_id, roles).",
                error="invalid_token",
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
            raise ServiceUnavailable(
                "The identity provider's key set cannot be fetched right now."
            ) from None
        except (jwt.PyJWKClientError, jwt.InvalidTokenError) as exc:
            raise Unauthenticated(
                f"The bearer token's signing key is unknown: {exc}.", error="invalid_token"
            ) from None
        return signing_key.key
