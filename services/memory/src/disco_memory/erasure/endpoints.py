"""``/v1/memory/erasure``: forget a user or a whole tenant."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from disco_common.auth import Role
from disco_common.ids import Id
from disco_common.memory import ErasureResult
from disco_memory.erasure import service
from disco_service import (
    ErasureRepository,
    Identity,
    IdentityDep,
    JSONRoute,
    SessionDep,
    error_responses,
    require_role,
)

router = APIRouter(prefix="/v1/memory/erasure", tags=["erasure"], route_class=JSONRoute)

SCHEMA = "memory"

AdminDep = Annotated[Identity, Depends(require_role(Role.ADMIN))]


@router.delete("/users/{user_id}", response_model=ErasureResult, responses=error_responses(403))
async def erase_user(user_id: Id, session: SessionDep, identity: IdentityDep) -> ErasureResult:
    """Delete everything the user stored in the caller's tenant, across every memory
    family, in one transaction. A user may erase themselves; anyone else needs ``admin``."""
    return await service.erase_user(ErasureRepository(session, SCHEMA), user_id, caller=identity)


@router.delete("/tenant", response_model=ErasureResult, responses=error_responses(403))
async def erase_tenant(session: SessionDep, identity: AdminDep) -> ErasureResult:
    """Delete everything of the caller's tenant, in one transaction (``admin`` only)."""
    return await service.erase_tenant(ErasureRepository(session, SCHEMA), caller=identity)
