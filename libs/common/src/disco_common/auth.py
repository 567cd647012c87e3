"""What a disco bearer token says about its holder."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from disco_common.ids import Id, TenantId

__all__ = ["ON_BEHALF_OF_TENANT_HEADER", "ON_BEHALF_OF_USER_HEADER", "Role", "TokenClaims"]

# A caller holding the `service` role (a platform agent serving many tenants) may
# act for the tenant and user of the envelope it is handling by naming them in
# these headers; for anyone else they are ignored.
ON_BEHALF_OF_TENANT_HEADER = "X-Disco-Tenant"
ON_BEHALF_OF_USER_HEADER = "X-Disco-User"


class Role(StrEnum):
    """Roles a token may carry."""

    USER = "user"
    """A person or an agent acting for one tenant."""
    SERVICE = "service"
    """A platform agent or service that may act on behalf of any tenant it is handling."""
    ADMIN = "admin"
    """May run tenant-wide operations (erasing a tenant, for instance)."""
    OPERATOR = "operator"
    """Watches and answers every user's sessions of its tenant (the gateway's UI streams)."""


class TokenClaims(BaseModel):
    """The claims of a disco JWT (``sub``, ``tenant_id``, ``user_id``, ``roles``)."""

    model_config = ConfigDict(extra="ignore")

    sub: str = Field(min_length=1, max_length=200)
    tenant_id: TenantId
    user_id: Id
    roles: list[Role] = Field(default_factory=lambda: [Role.USER])
    exp: int | None = None
    iat: int | None = None
    iss: str | None = None
    aud: str | list[str] | None = None
