"""Postgres ``LISTEN`` for a service's lifetime, on a connection of its own (made
apart from the service's pool: a small pool is never one connection short).

A service that keeps something derived from the database (a cache, a wake-up
for streams) learns of other instances' commits by ``NOTIFY``. Notifications
sent while nobody listens are gone, so the caller hears when listening starts
(``on_listening``: anything derived before may be stale) and when the
connection is lost (``on_lost``: stop trusting what is derived until the next
``on_listening``). The connection is tried again every ``reconnect_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import structlog

from disco_service._background import in_background
from disco_service._db import Database

__all__ = ["listen", "listening"]

_log = structlog.get_logger("disco_service.listen")


def _nothing() -> None:
    return None


def _setter(event: asyncio.Event) -> Callable[[Any], None]:
    def set_it(_connection: Any) -> None:
        event.set()

    return set_it


async def listen(
    database: Database,
    channel: str,
    on_notify: Callable[[str], None],
    *,
    on_listening: Callable[[], None] = _nothing,
    on_lost: Callable[[], None] = _nothing,
    reconnect_seconds: float = 1.0,
) -> None:
    """``LISTEN`` to ``channel`` until cancelled, calling ``on_notify(payload)`` for each
    notification (in the event loop: keep it short).

    ``on_listening`` is called once the ``LISTEN`` is in force (after every
    reconnection too), ``on_lost`` once when that ends (the connection lost, or
    this job cancelled). Before the first ``on_listening``, nothing is heard.
    """

    def notified(_connection: Any, _pid: int, _channel: str, payload: str) -> None:
        on_notify(payload)

    while True:
        heard = False
        try:
            async with database.unpooled.connect() as connection:
                raw = (await connection.get_raw_connection()).driver_connection
                assert raw is not None
                lost = asyncio.Event()
                raw.add_termination_listener(_setter(lost))
                try:
                    await raw.add_listener(channel, notified)
                    heard = True
                    on_listening()
                    await lost.wait()
                except asyncio.CancelledError:
                    # Stopped, the connection still good: it is closed as it ends.
                    with contextlib.suppress(Exception):
                        await raw.remove_listener(channel, notified)
                    raise
                except BaseException:
                    await connection.invalidate()
                    raise
                # Lost: closing it would wait on a dead socket; drop it.
                await connection.invalidate()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not heard:
                _log.warning("listen_connection_failed", channel=channel, error=repr(exc))
        finally:
            if heard:
                on_lost()  # once per spell of listening, cancelled or lost
        if heard:
            _log.warning("listen_connection_lost", channel=channel)
        await asyncio.sleep(reconnect_seconds)


@asynccontextmanager
async def listening(
    database: Database,
    channel: str,
    on_notify: Callable[[str], None],
    *,
    on_listening: Callable[[], None] = _nothing,
    on_lost: Callable[[], None] = _nothing,
    reconnect_seconds: float = 1.0,
) -> AsyncIterator[None]:
    """:func:`listen` in a task while the block runs (a lifespan step); cancelled after."""
    job = listen(
        database,
        channel,
        on_notify,
        on_listening=on_listening,
        on_lost=on_lost,
        reconnect_seconds=reconnect_seconds,
    )
    async with in_background(job, f"disco-listen-{channel}"):
        yield
