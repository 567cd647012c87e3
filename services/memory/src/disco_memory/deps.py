"""FastAPI dependencies shared by the memory's routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine

from disco_memory.runtime import MemoryRuntime
from disco_memory.state import MemoryState

__all__ = ["EngineDep", "RuntimeDep", "get_engine", "get_runtime"]


async def get_runtime(request: Request) -> MemoryRuntime:
    """FastAPI dependency: the memory runtime of the app serving ``request``."""
    return MemoryState.of(request).runtime


RuntimeDep = Annotated[MemoryRuntime, Depends(get_runtime)]
"""The memory service's runtime (settings, embedding provider)."""


async def get_engine(request: Request) -> AsyncEngine:
    """FastAPI dependency: the database engine, for reads that are one statement each
    (no unit of work: no BEGIN, no COMMIT)."""
    return MemoryState.of(request).require_database().engine


EngineDep = Annotated[AsyncEngine, Depends(get_engine)]
"""The memory service's database engine."""
