"""Structured logs: structlog for our own lines, the same renderer for everyone else's.

JSON lines by default; a coloured console renderer in dev when stderr is a
terminal (or when ``DISCO_LOG_JSON=false``). Each line carries what the request
middleware and the auth dependency bound: ``request_id``, ``trace_id``,
``span_id``, ``tenant_id``, ``user_id``.
"""

from __future__ import annotations

import logging
import sys

import structlog
from structlog.types import EventDict, Processor, WrappedLogger

from disco.telemetry import add_handler_context, add_trace_ids
from disco_service._settings import ServiceSettings

__all__ = ["configure_logging"]


def _add_service(service: str) -> Processor:
    def processor(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
        event.setdefault("service", service)
        return event

    return processor


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
    json_lines = wants_json(settings)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _add_service(settings.service_name),
        add_trace_ids,
        add_handler_context,
        structlog.processors.StackInfoRenderer(),
    ]
    if json_lines:
        shared.append(structlog.processors.format_exc_info)
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    renderer: Processor = (
        structlog.processors.JSONRenderer()
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    handler.set_name("disco")
    root = logging.getLogger()
    for existing in list(root.handlers):
        if existing.get_name() == "disco":
            root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(settings.log_level)
    # uvicorn's own loggers speak through ours; its access log is replaced by the
    # request middleware's line, which knows the route, tenant and request id.
    for name in ("uvicorn", "uvicorn.error"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    logging.getLogger("uvicorn.access").disabled = True
    # aiokafka logs every reconnect attempt at ERROR while a broker is away;
    # readiness already reports that.
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, root.level))
