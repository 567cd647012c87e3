"""FastAPI dependencies: what a route gets from the running app.

The wiring between a request and the :class:`~disco_service.ServiceState`:
the caller's identity (bearer token), the request's session (one
tenant-scoped transaction) and the bus. The parts themselves
(:class:`~disco_service.TokenVerifier`, :class:`~disco_service.Database`,
the bus) know nothing of requests or of the state that holds them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Annotated

import structlog
from fastapi import Depends, Request
from fastapi.security import HTTPBearer
from opentelemetry import trace
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import HTTPConnection

from disco.bus import BusClient, sign_as
from disco_common.auth import Role
from disco_service._auth import Identity
from disco_service._errors import Forbidden, Unauthenticated
from disco_service._settings import ServiceSettings
from disco_service._state import ServiceState, get_state

__all__ = [
    "BusDep",
    "IdentityDep",
    "SessionDep",
    "get_bus",
    "get_identity",
    "get_session",
    "identify",
    "identify_token",
    "require_role",
]


async def identify(connection: HTTPConnection, token: str) -> Identity:
    """The :class:`Identity` of ``token``, a bearer token ``connection`` carries.

    For routes that authenticate by themselves (the gateway's A2A endpoints,
    mounted from the a2a-sdk); FastAPI routes take :data:`IdentityDep`.

    Raises:
        Unauthenticated: the token is not valid.
    """
    return await identify_token(get_state(connection), token, connection.headers)


async def identify_token(
    state: ServiceState[ServiceSettings], token: str, headers: Mapping[str, str]
) -> Identity:
    """:func:`identify` for a call that is not HTTP (the gateway's gRPC binding):
    ``headers`` are the call's (lower-case) metadata."""
    claims = await state.verifier.verify(token)
    identity = replace(Identity.from_claims(claims, headers), credential=token)
    # What this request publishes is vouched for by the caller's own token (the
    # caller's tenant), not by the service's identity.
    sign_as(token)
    # Every later log line of this request carries the tenant and user.
    structlog.contextvars.bind_contextvars(
        tenant_id=identity.tenant_id, user_id=identity.user_id, sub=identity.sub
    )
    span = trace.get_current_span()
    span.set_attribute("disco.tenant_id", identity.tenant_id)
    span.set_attribute("enduser.id", identity.user_id)
    return identity


class _BearerIdentity(HTTPBearer):
    """FastAPI's bearer scheme (the OpenAPI document names it as before), answering the
    caller's :class:`Identity` itself: one dependency per request rather than the
    scheme and a dependency on it (each one FastAPI resolves costs)."""

    async def __call__(self, request: HTTPConnection) -> Identity:  # type: ignore[override]
        credentials = await super().__call__(request)
        if credentials is None:
            raise Unauthenticated("A bearer token is required (Authorization: Bearer <jwt>).")
        return await identify(request, credentials.credentials)


get_identity = _BearerIdentity(
    auto_error=False, bearerFormat="JWT", description="A disco JWT.", scheme_name="HTTPBearer"
)
"""FastAPI dependency: the caller's :class:`Identity` from its bearer token (401 without a
valid one)."""


IdentityDep = Annotated[Identity, Depends(get_identity)]
"""The authenticated caller (401 when there is no valid token)."""


def require_role(*roles: Role) -> Callable[[Identity], Awaitable[Identity]]:
    """A dependency that lets through callers holding any of ``roles`` (403 otherwise).

    ``AdminDep = Annotated[Identity, Depends(require_role(Role.ADMIN))]``.
    """
    if not roles:
        raise ValueError("require_role needs at least one role")
    wanted = frozenset(roles)

    async def check(identity: IdentityDep) -> Identity:
        if identity.roles.isdisjoint(wanted):
            names = ", ".join(sorted(role.value for role in wanted))
            raise Forbidden(f"This operation needs the role {names}.")
        return identity

    return check


async def get_session(request: Request, identity: IdentityDep) -> AsyncIterator[AsyncSession]:
    """FastAPI dependency: the request's one transaction, scoped to the caller's tenant.

    Committed after the route returned and its response was rendered, but
    before it is sent — so a client never sees success for a transaction that
    then failed — and rolled back if anything raised. Events added with
    :func:`disco_service.publish_after_commit` are published once it committed.
    """
    database = get_state(request).require_database()
    async with database.unit_of_work(identity.tenant_id, identity.user_id) as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
"""The request's session (one transaction, committed once at the end of the route)."""


async def get_bus(request: Request) -> BusClient:
    """FastAPI dependency: the service's started bus client.

    For publishing that is not tied to a database transaction; anything a
    transaction causes goes through :func:`disco_service.publish_after_commit`.
    """
    return get_state(request).require_bus()


BusDep = Annotated[BusClient, Depends(get_bus)]
"""The service's bus client."""
