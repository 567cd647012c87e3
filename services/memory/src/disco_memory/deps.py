"""FastAPI dependencies shared by the memory's routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from disco_memory.runtime import MemoryRuntime
from disco_memory.state import MemoryState

__all__ = ["RuntimeDep", "get_runtime"]


async def get_runtime(request: Request) -> MemoryRuntime:
    """FastAPI dependency: the memory runtime of the app serving ``request``."""
    return MemoryState.of(request).runtime


RuntimeDep = Annotated[MemoryRuntime, Depends(get_runtime)]
"""The memory service's runtime (settings, embedding provider)."""
