"""Bearer-token authentication and the caller's identity.

Tokens are JWTs with the claims of :class:`disco_common.auth.TokenClaims`,
signed with one of the algorithms of ``DISCO_AUTH_ALGORITHMS`` (any other is
refused). HMAC tokens are verified with ``DISCO_AUTH_SECRET`` (dev), asymmetric
ones with the keys of ``DISCO_AUTH_JWKS_URL`` (production); the algorithm in the
token header picks which, and each key only ever verifies its own kind, so a
public key can never be used as an HMAC secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import TypeAdapter, ValidationError

from disco.bus import CredentialError, CredentialVerifier
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
    ``sub`` and ``roles`` stay the caller's own. ``credential`` is the verified
    bearer token itself: what the service signs the envelopes it publishes for
    this caller with (``disco-tenant-credential``).
    """

    tenant_id: str
    user_id: str
    sub: str
    roles: frozenset[Role]
    on_behalf_of: bool = False
    credential: str | None = field(default=None, repr=False, compare=False)

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

    The verification itself is the bus's (:class:`disco.bus.CredentialVerifier`:
    the same issuer vouches for HTTP callers and for envelopes' tenants); here its
    failures become HTTP errors. The JWKS client caches the key set
    (``DISCO_AUTH_JWKS_CACHE_SECONDS``) and refetches when a token names an
    unknown key id.
    """

    def __init__(self, settings: ServiceSettings) -> None:
        self._verifier = CredentialVerifier(
            settings, remember_seconds=VERIFIED_TOKEN_SECONDS, capacity=VERIFIED_TOKEN_CAPACITY
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
        try:
            return await self._verifier.verify(token)
        except CredentialError as exc:
            if exc.unavailable:
                raise ServiceUnavailable(
                    "The identity provider's key set cannot be fetched right now."
                ) from None
            reason = exc.reason.replace("the token", "the bearer token", 1)
            raise Unauthenticated(
                f"{reason[:1].upper()}{reason[1:]}.",
                error="invalid_token",
                details=exc.details,
            ) from None
