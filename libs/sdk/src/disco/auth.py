"""Tokens: what an agent sends the disco services, and the dev tokens a local stack accepts.

Every HTTP route of the services but health, metrics and agent cards wants a
bearer JWT whose claims are :class:`TokenClaims` (``sub``, ``tenant_id``,
``user_id``, ``roles``). An agent's service clients ask a
:class:`TokenProvider` for one before each request:

- :class:`StaticToken`: a token the operator issued (``DISCO_AUTH_TOKEN``);
- :class:`DevTokenMinter`: in dev, tokens minted from ``DISCO_AUTH_SECRET``
  (:data:`DEV_AUTH_SECRET` when unset) and renewed before they expire.

:class:`disco.clients.ServiceClientSettings` picks one from the ``DISCO_*``
variables (``settings.token_provider()``); pass ``token=...`` to a client to
choose yourself. :func:`mint_dev_token` signs one token, as ``disco token
--tenant T --user U`` does.

Production verifies tokens against ``DISCO_AUTH_JWKS_URL`` instead: minting is
for dev stacks and tests.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Protocol

import jwt

from disco_common.auth import Role, TokenClaims

__all__ = [
    "DEV_AUTH_ALGORITHM",
    "DEV_AUTH_SECRET",
    "DevTokenMinter",
    "Role",
    "StaticToken",
    "TokenClaims",
    "TokenProvider",
    "mint_dev_token",
]

DEV_AUTH_SECRET = "disco-dev-secret-do-not-use-in-production"  # noqa: S105 - a known dev default
"""The secret a dev stack signs with when ``DISCO_AUTH_SECRET`` is unset.

Services refuse it outside ``DISCO_ENV=dev``.
"""

DEV_AUTH_ALGORITHM = "HS256"
"""The algorithm dev tokens are signed with."""


def mint_dev_token(
    secret: str,
    tenant_id: str,
    user_id: str,
    roles: Iterable[Role | str] = (Role.USER,),
    ttl_seconds: int = 3600,
    sub: str | None = None,
    *,
    issuer: str | None = None,
    audience: str | None = None,
) -> str:
    """A signed HS256 bearer token for ``tenant_id``/``user_id``.

    Args:
        secret: the HMAC secret the services verify with (``DISCO_AUTH_SECRET``).
        tenant_id: the tenant the holder acts for.
        user_id: the user the holder acts as.
        roles: ``user``, ``service`` and/or ``admin``.
        ttl_seconds: lifetime from now; must be positive.
        sub: the subject; defaults to ``user_id``.
        issuer: the ``iss`` claim, when the services check one (``DISCO_AUTH_ISSUER``).
        audience: the ``aud`` claim, when the services check one (``DISCO_AUTH_AUDIENCE``).

    Returns:
        The compact JWT, ready for an ``Authorization: Bearer`` header.

    Raises:
        ValueError: an empty secret, a non-positive ttl, an unknown role, or a
            tenant/user id the services would reject.
    """
    if not secret:
        raise ValueError("mint_dev_token needs a secret: pass DISCO_AUTH_SECRET's value")
    if ttl_seconds <= 0:
        raise ValueError(f"ttl_seconds must be positive, got {ttl_seconds}")
    now = int(time.time())
    try:
        role_list = [Role(role) for role in roles]
    except ValueError as exc:
        raise ValueError(f"{exc}; known roles: {[r.value for r in Role]}") from None
    # Building the claims through the model the services validate with keeps the
    # two sides on the same names and constraints.
    claims = TokenClaims(
        sub=sub or user_id,
        tenant_id=tenant_id,
        user_id=user_id,
        roles=role_list,
        iat=now,
        exp=now + ttl_seconds,
        iss=issuer,
        aud=audience,
    )
    return jwt.encode(
        claims.model_dump(mode="json", exclude_none=True), secret, algorithm=DEV_AUTH_ALGORITHM
    )


class TokenProvider(Protocol):
    """Supplies the bearer token for the next request."""

    async def token(self) -> str:
        """A token that is valid now."""
        ...


class StaticToken:
    """A token given from outside (``DISCO_AUTH_TOKEN``); never refreshed.

    Raises:
        ValueError: the token is empty.
    """

    def __init__(self, token: str) -> None:
        if not token:
            raise ValueError("StaticToken needs a non-empty token")
        self._token = token

    async def token(self) -> str:
        """The token given."""
        return self._token

    def current(self) -> str | None:
        """The token, without awaiting (what :meth:`token` returns)."""
        return self._token


class DevTokenMinter:
    """Mints HS256 dev tokens for one tenant/user and renews them before expiry.

    Args:
        secret: the HMAC secret the services verify with (``DISCO_AUTH_SECRET``).
        tenant_id: the tenant the tokens act for.
        user_id: the user the tokens act as.
        roles: the roles they carry (``service`` by default: an agent that may act
            for the tenant of each envelope it handles).
        ttl_seconds: the lifetime of each token; a new one is minted with a fifth left.
    """

    def __init__(
        self,
        secret: str,
        *,
        tenant_id: str,
        user_id: str,
        roles: tuple[Role, ...] = (Role.SERVICE,),
        ttl_seconds: int = 3600,
    ) -> None:
        self._secret = secret
        self._tenant_id = tenant_id
        self._user_id = user_id
        self._roles = roles
        self._ttl_seconds = ttl_seconds
        self._token: str | None = None
        self._renew_at = 0.0

    def current(self) -> str | None:
        """The token :meth:`token` would return now if no new one is due, else None
        (a caller on a hot path then awaits :meth:`token`)."""
        if self._token is None or time.monotonic() >= self._renew_at:
            return None
        return self._token

    async def token(self) -> str:
        """A token valid for at least a fifth of its lifetime."""
        now = time.monotonic()
        if self._token is None or now >= self._renew_at:
            self._token = mint_dev_token(
                self._secret, self._tenant_id, self._user_id, self._roles, self._ttl_seconds
            )
            # Renew with a fifth of the lifetime left, so no request carries a stale token.
            self._renew_at = now + self._ttl_seconds * 0.8
        return self._token
