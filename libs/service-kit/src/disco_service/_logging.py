"""Structured logs: structlog for our own lines, the same renderer for everyone else's.

JSON lines by default; a coloured console renderer in dev when stderr is a
terminal (or when ``DISCO_LOG_JSON=false``). Each line carries what the request
middleware and the auth dependency bound: ``request_id``, ``trace_id``,
``span_id``, ``tenant_id``, ``user_id``.
"""

from __future__ import annotations

import logging
import sys

from disco.telemetry import configure_logging as configure_sdk_logging
from disco_service._settings import ServiceSettings

__all__ = ["configure_logging"]


def wants_json(settings: ServiceSettings) -> bool:
    """Whether logs are rendered as JSON lines for ``settings``."""
    if settings.log_json is not None:
        return settings.log_json
    return not (settings.is_dev and sys.stderr.isatty())


def configure_logging(settings: ServiceSettings) -> None:
    """Route structlog and the standard library through one renderer on stderr.

    Process-wide (logging is): the last service configured in a process wins,
    which only matters to tests that run several apps at once.
    """
    configure_sdk_logging(
        level=settings.log_level, json=wants_json(settings), service=settings.service_name
    )
    # uvicorn's own loggers speak through ours; its access log is replaced by the
    # request middleware's line, which knows the route, tenant and request id.
    for name in ("uvicorn", "uvicorn.error"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    logging.getLogger("uvicorn.access").disabled = True
