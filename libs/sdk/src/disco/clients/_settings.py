"""Where the services are and how to authenticate to them (``DISCO_*``)."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from disco.auth import DEV_AUTH_SECRET, DevTokenMinter, StaticToken, TokenProvider
from disco_common.auth import Role
from disco_common.ids import Id, TenantId

__all__ = ["ServiceClientSettings"]


class ServiceClientSettings(BaseSettings):
    """How an agent reaches the registry, memory, tracker and gateway.

    Authentication: ``DISCO_AUTH_TOKEN`` when the operator issued one; otherwise
    (dev) a token is minted from ``DISCO_AUTH_SECRET`` (the dev default when
    unset) for ``DISCO_TENANT_ID``/``DISCO_USER_ID`` with the roles in
    ``DISCO_AGENT_ROLES`` — ``service`` by default, so a local agent may act for
    the tenant of each envelope it handles.
    """

    model_config = SettingsConfigDict(env_prefix="DISCO_", extra="ignore", frozen=True)

    registry_url: str = "http://127.0.0.1:8081"
    memory_url: str = "http://127.0.0.1:8082"
    tracker_url: str = "http://127.0.0.1:8083"
    gateway_url: str = "http://127.0.0.1:8080"
    auth_token: SecretStr | None = Field(default=None, description="A bearer token to use as is.")
    auth_secret: SecretStr | None = Field(default=None, description="Dev: the HS256 secret.")
    tenant_id: TenantId = Field(default="default", description="Dev: tenant of minted tokens.")
    user_id: Id = Field(default="agent", description="Dev: user of minted tokens.")
    agent_roles: tuple[Role, ...] = Field(default=(Role.SERVICE,))
    http_timeout_seconds: float = Field(default=10.0, gt=0, le=600)
    http_retries: int = Field(default=2, ge=0, le=10)

    def token_provider(self) -> TokenProvider:
        """The token source these settings describe."""
        return token_provider_from_settings(
            auth_token=self.auth_token,
            auth_secret=self.auth_secret,
            tenant_id=self.tenant_id,
            user_id=self.user_id,
            roles=self.agent_roles,
        )


def token_provider_from_settings(
    *,
    auth_token: SecretStr | None,
    auth_secret: SecretStr | None,
    tenant_id: str,
    user_id: str,
    roles: tuple[Role, ...] = (Role.SERVICE,),
) -> TokenProvider:
    """The token source the settings describe: a given token, else dev minting."""
    if auth_token is not None and auth_token.get_secret_value():
        return StaticToken(auth_token.get_secret_value())
    secret = auth_secret.get_secret_value() if auth_secret is not None else DEV_AUTH_SECRET
    return DevTokenMinter(secret, tenant_id=tenant_id, user_id=user_id, roles=roles)
