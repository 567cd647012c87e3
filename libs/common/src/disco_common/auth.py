"""What a disco bearer token says about its holder."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from disco_common.ids import Id, TenantId

__all__ = [
    "ON_BEHALF_OF_TENANT_HEADER",
    "ON_BEHALF_OF_USER_HEADER",
    "TENANT_CREDENTIAL_HEADER",
    "UNAUTHENTICATED_TENANT",
    "Role",
    "TokenClaims",
]

# A caller holding the `service` role (a platform agent serving many tenants) may
# act for the tenant and user of the envelope it is handling by naming them in
# these headers; for anyone else they are ignored.
ON_BEHALF_OF_TENANT_HEADER = "X-Disco-Tenant"
ON_BEHALF_OF_USER_HEADER = "X-Disco-User"

TENANT_CREDENTIAL_HEADER = "disco-tenant-credential"
"""The Kafka record header carrying the producer's credential: a JWT of the HTTP
tokens' issuer (claims :class:`TokenClaims`) that vouches for the envelope's tenant.

Not a ``ce_`` header on purpose: in CloudEvents binary mode every ``ce_*`` header
is an attribute of the event, so a credential there would become part of the
event (stored, forwarded, shown to handlers). Like ``content-type`` it is about
the record, not the event."""

UNAUTHENTICATED_TENANT = "unauthenticated_tenant"
"""The dead-letter reason (``dlq_error_type``) of an envelope whose tenant no valid
credential vouches for."""


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

    def vouches_for(self, tenant_id: str | None) -> bool:
        """Whether a credential with these claims may speak for ``tenant_id``.

        Its own tenant always; any tenant for a ``service`` holder (a platform
        agent handling every tenant's envelopes, as over HTTP); an envelope
        without a tenant needs only a valid credential.
        """
        return tenant_id is None or tenant_id == self.tenant_id or Role.SERVICE in self.roles
