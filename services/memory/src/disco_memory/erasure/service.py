"""Erasure of a user or a tenant (right to be forgotten, offboarding)."""

from __future__ import annotations

import structlog

from disco_common.auth import Role
from disco_common.memory import ErasureResult, ErasureScope
from disco_memory.erasure.repository import ErasureRepository
from disco_service import Forbidden, Identity

__all__ = ["erase_tenant", "erase_user"]

log = structlog.get_logger("disco_memory.erasure")


async def erase_user(
    repository: ErasureRepository, user_id: str, *, caller: Identity
) -> ErasureResult:
    """Delete everything of ``user_id`` in the caller's tenant.

    Raises:
        Forbidden: the caller is neither that user nor an admin.
    """
    if user_id != caller.user_id and not caller.has_role(Role.ADMIN):
        raise Forbidden("erasing another user's memory needs the admin role")
    deleted = await repository.erase_user(user_id)
    log.info("user_erased", erased_user=user_id, rows=sum(deleted.values()))
    return ErasureResult(
        scope=ErasureScope.USER, tenant_id=caller.tenant_id, user_id=user_id, deleted=deleted
    )


async def erase_tenant(repository: ErasureRepository, *, caller: Identity) -> ErasureResult:
    """Delete everything of the caller's tenant (the caller must be an admin)."""
    deleted = await repository.erase_tenant()
    log.info("tenant_erased", rows=sum(deleted.values()))
    return ErasureResult(scope=ErasureScope.TENANT, tenant_id=caller.tenant_id, deleted=deleted)
