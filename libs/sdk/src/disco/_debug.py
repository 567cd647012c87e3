"""Errors for people: one line that says what went wrong, the traceback on demand.

A command of the ``disco`` CLI or an agent process started with
:func:`disco.serve` that fails for a reason a person can act on (a port taken,
a broker down, a refusal) says so in one line; ``--debug`` (on the CLI) or
``DISCO_DEBUG=1`` (anywhere) shows the traceback as well.
"""

from __future__ import annotations

import os

__all__ = ["DEBUG_HINT", "debug_enabled", "describe"]

DEBUG_HINT = "(--debug or DISCO_DEBUG=1 shows the traceback)"


def debug_enabled() -> bool:
    """Whether ``DISCO_DEBUG`` asks for tracebacks (``1``, ``true``, ``yes``, ``on``)."""
    return os.environ.get("DISCO_DEBUG", "").strip().lower() in {"1", "true", "yes", "on"}


def describe(exc: BaseException) -> str:
    """``exc`` as one line: its message, or its type when it has none."""
    message = " ".join(str(exc).split())
    name = type(exc).__name__
    return f"{name}: {message}" if message else name
