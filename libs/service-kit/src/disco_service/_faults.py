"""Telling "the database is away" from "this data is wrong", and waiting out the first.

A stalled or restarting Postgres shows up as one of a few errors: the
client-side statement bound (:class:`TimeoutError`), the pool's acquire bound
(``sqlalchemy.exc.TimeoutError``), a refused or dropped connection
(:class:`OSError`, a connection-class SQLSTATE) or the server cancelling a
statement past ``statement_timeout``. Waiting can fix all of them, so:

- an HTTP request answers 503 with the stable error shape at once (see
  :mod:`disco_service._errors`) instead of holding the caller;
- a consumer handler keeps its envelope and retries it
  (:func:`retry_while_unavailable`) instead of dead-lettering it: the envelope
  was good, the database was not there.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import structlog
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

__all__ = ["database_unavailable", "retry_while_unavailable", "sqlstate_of"]

log = structlog.get_logger("disco_service.faults")

P = ParamSpec("P")
R = TypeVar("R")

# SQLSTATE classes that say the server, not the statement, is the problem:
# 08 connection exception, 53 insufficient resources (too many connections),
# 57 operator intervention (57014 statement timeout, 57P01 admin shutdown,
# 57P03 cannot connect now, i.e. starting up or recovering).
_UNAVAILABLE_CLASSES = ("08", "53", "57")


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE of a driver error (wrapped by SQLAlchemy or not), when it has one."""
    original = getattr(exc, "orig", None)
    for candidate in (original, getattr(original, "__cause__", None), exc):
        state = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if isinstance(state, str):
            return state
    return None


def database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means the database is unreachable, stalled or restarting.

    True for errors that waiting can fix; False for errors of the statement or
    the data (a constraint, a syntax error), which retrying would only repeat.
    """
    if isinstance(exc, (TimeoutError, PoolTimeoutError, OSError)):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        state = sqlstate_of(exc)
        if state is not None:
            return state.startswith(_UNAVAILABLE_CLASSES)
        return isinstance(exc, (OperationalError, InterfaceError))
    return False


def retry_while_unavailable(
    handler: Callable[P, Awaitable[R]],
    *,
    backoff_seconds: float = 0.2,
    backoff_max_seconds: float = 5.0,
) -> Callable[P, Awaitable[R]]:
    """Wrap a consumer handler so that it waits out a database outage.

    While the database is unavailable (:func:`database_unavailable`) the call
    is retried with capped exponential backoff, for as long as it takes: the
    partition pauses behind it, and nothing is dead-lettered because the
    database was away. Any other error propagates at once, so the consumer's
    own retry-then-DLQ policy still handles bad envelopes. Stopping the
    consumer cancels the wait; the envelope's offset was not committed, so it
    is delivered again.
    """

    @functools.wraps(handler)
    async def patient(*args: P.args, **kwargs: P.kwargs) -> R:
        delay = backoff_seconds
        attempt = 0
        while True:
            attempt += 1
            try:
                return await handler(*args, **kwargs)
            except Exception as exc:
                if not database_unavailable(exc):
                    raise
                log.warning(
                    "database_unavailable_retrying",
                    handler=getattr(handler, "__qualname__", repr(handler)),
                    attempt=attempt,
                    retry_in_seconds=delay,
                    error=repr(exc),
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, backoff_max_seconds)

    return patient
