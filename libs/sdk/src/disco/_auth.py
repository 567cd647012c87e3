"""Minting the bearer tokens disco services accept in dev mode.

Dev mode signs tokens HS256 with ``DISCO_AUTH_SECRET`` (``disco token --tenant T
--user U`` calls :func:`mint_dev_token`). The claims are exactly those of
:class:`disco_common.auth.TokenClaims`, which the services validate, so a token
minted here is accepted by any service configured with the same secret.

Production verifies tokens against ``DISCO_AUTH_JWKS_URL`` instead; nothing
here is used there.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import jwt

from disco_common.auth import Role, TokenClaims

__all__ = ["DEV_AUTH_ALGORITHM", "DEV_AUTH_SECRET", "mint_dev_token"]

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
