"""Helpers for the service kit's integration tests: the test app, tokens, reading topics."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco_common.auth import Role
from disco_service import ServiceSettings, ServiceState, create_service_app
from tests.integration.kit.app import router


def build_app(settings: ServiceSettings, schema: str, **options: Any) -> FastAPI:
    return create_service_app(
        ServiceState(settings, schema=schema), title="kit test", routers=[router], **options
    )


@asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """Run ``app``'s lifespan and hand out a client talking to it in-process."""
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
        transport = httpx.ASGITransport(app=manager.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://kit.test") as client:
            yield client


def bearer(
    tenant: str = "acme",
    user: str = "alice",
    roles: Iterable[Role] = (Role.USER,),
    *,
    secret: str = DEV_AUTH_SECRET,
    ttl_seconds: int = 300,
) -> dict[str, str]:
    """An Authorization header with a dev token."""
    token = mint_dev_token(secret, tenant, user, roles, ttl_seconds)
    return {"Authorization": f"Bearer {token}"}


def new_tenant() -> str:
    """A tenant id no other test uses."""
    return f"tenant-{uuid.uuid4().hex[:10]}"
