"""Erasure of a user or a tenant (right to be forgotten, offboarding).

The memory service erases its own rows in the request's transaction and
announces ``erasure.requested`` in the same transaction (its outbox): every
other service follows with its own rows (``disco_service.erasure_follower``).
"""

from __future__ import annotations

import structlog

from disco_common.auth import Role
from disco_common.memory import ErasureResult, ErasureScope
from disco_service import ErasureRepository, Forbidden, Identity, announce_erasure

__all__ = ["erase_tenant", "erase_user"]

log = structlog.get_logger("disco_memory.erasure")


async def erase_user(
    repository: ErasureRepository, user_id: str, *, caller: Identity
) -> ErasureResult:
    """Delete everything of ``user_id`` in the caller's tenant, and tell the other services.

    Raises:
        Forbidden: the caller is neither that user nor an admin.
    """
    if user_id != caller.user_id and not caller.has_role(Role.ADMIN):
        raise Forbidden("erasing another user's memory needs the admin role")
    deleted = await repository.erase_user(user_id)
    await announce_erasure(
        repository.session, scope=ErasureScope.USER, user_id=user_id, requested_by=caller.user_id
    )
    log.info("user_erased", erased_user=user_id, rows=sum(deleted.values()))
    return ErasureResult(
        scope=ErasureScope.USER, tenant_id=caller.tenant_id, user_id=user_id, deleted=deleted
    )


async def erase_tenant(repository: ErasureRepository, *, caller: Identity) -> ErasureResult:
    """Delete everything of the caller's tenant (the caller must be an admin), and tell
    the other services."""
    deleted = await repository.erase_tenant()
    await announce_erasure(
        repository.session, scope=ErasureScope.TENANT, user_id=None, requested_by=caller.user_id
    )
    log.info("tenant_erased", rows=sum(deleted.values()))
    return ErasureResult(scope=ErasureScope.TENANT, tenant_id=caller.tenant_id, deleted=deleted)
