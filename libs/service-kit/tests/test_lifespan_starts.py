"""Starts run alongside the service's start: side by side, awaited before it counts as started,
and cancelled before their hook is exited when the start fails."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from fastapi import FastAPI

from disco_service import ServiceSettings, ServiceState, create_service_app


def _app(*hooks: object) -> FastAPI:
    settings = ServiceSettings(service_name="kit-starts", env="dev")
    return create_service_app(
        ServiceState(settings),
        title="starts",
        lifespan_hooks=hooks,  # type: ignore[arg-type]
        database=False,
        bus=False,
        outbox=False,
    )


async def test_slow_starts_of_two_hooks_run_side_by_side_and_finish_before_the_service_starts() -> (
    None
):
    events: list[str] = []
    both_begun = asyncio.Event()
    begun = 0

    async def join(name: str) -> None:
        nonlocal begun
        begun += 1
        if begun == 2:
            both_begun.set()
        # Each start waits for the other to have begun: one after the other, this never ends.
        await asyncio.wait_for(both_begun.wait(), 5)
        events.append(f"{name} joined")

    def hook(name: str) -> object:
        @asynccontextmanager
        async def run(state: ServiceState[ServiceSettings]) -> AsyncIterator[None]:
            state.start_alongside(join(name), name=name)
            events.append(f"{name} entered")
            yield
            events.append(f"{name} exited")

        return run

    app = _app(hook("first"), hook("second"))
    async with app.router.lifespan_context(app):
        events.append("started")
    assert events[:2] == ["first entered", "second entered"]
    assert sorted(events[2:4]) == ["first joined", "second joined"]
    assert events[4:] == ["started", "second exited", "first exited"]


async def test_a_start_that_fails_fails_the_service_start_and_every_hook_is_exited() -> None:
    exited: list[str] = []

    async def refuse() -> None:
        raise ConnectionError("the broker is away")

    @asynccontextmanager
    async def hook(state: ServiceState[ServiceSettings]) -> AsyncIterator[None]:
        state.start_alongside(refuse(), name="refused")
        try:
            yield
        finally:
            exited.append("hook")

    app = _app(hook)
    with pytest.raises(ConnectionError, match="the broker is away"):
        async with app.router.lifespan_context(app):
            pytest.fail("the service started")  # pragma: no cover
    assert exited == ["hook"]


async def test_a_start_running_when_a_later_hook_fails_is_cancelled_before_its_hook_exits() -> None:
    order: list[str] = []

    async def join() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            order.append("join cancelled")
            raise

    @asynccontextmanager
    async def joining(state: ServiceState[ServiceSettings]) -> AsyncIterator[None]:
        state.start_alongside(join(), name="join")
        try:
            yield
        finally:
            order.append("joining hook exited")

    @asynccontextmanager
    async def failing(state: ServiceState[ServiceSettings]) -> AsyncIterator[None]:
        await asyncio.sleep(0)  # the join has begun
        raise RuntimeError("a later hook cannot start")
        yield  # pragma: no cover

    app = _app(joining, failing)
    with pytest.raises(RuntimeError, match="a later hook cannot start"):
        async with app.router.lifespan_context(app):
            pytest.fail("the service started")  # pragma: no cover
    assert order == ["join cancelled", "joining hook exited"]
