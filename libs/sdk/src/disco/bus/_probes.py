"""An agent's HTTP probes beside its metrics: ``/healthz`` (the process answers) and
``/readyz`` (every readiness check of the process passes).

Agents add a check each (:func:`add_readiness_check`): an agent is not ready
while its consumer has had no partition for longer than
``DISCO_BUS_NO_PARTITIONS_WARNING_SECONDS``. The probes are served by the
metrics server (:func:`~disco.bus.serve_metrics`) on ``DISCO_METRICS_PORT``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import REGISTRY, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

__all__ = ["ReadinessCheck", "add_readiness_check", "readiness", "remove_readiness_check", "serve"]

ReadinessCheck = Callable[[], tuple[bool, dict[str, Any]]]
"""Whether a part is ready, and what to show of it."""

_checks: dict[str, ReadinessCheck] = {}
_lock = threading.Lock()


def add_readiness_check(name: str, check: ReadinessCheck) -> None:
    """Make ``/readyz`` ask ``check`` (replacing one of the same name)."""
    with _lock:
        _checks[name] = check


def remove_readiness_check(name: str) -> None:
    """Stop asking the check of ``name`` (idempotent)."""
    with _lock:
        _checks.pop(name, None)


def readiness() -> tuple[bool, dict[str, Any]]:
    """Whether every check passes, and what each shows."""
    with _lock:
        checks = dict(_checks)
    shown: dict[str, Any] = {}
    ready = True
    for name, check in checks.items():
        try:
            ok, details = check()
        except Exception as exc:  # a broken check says so, and is not ready
            ok, details = False, {"error": repr(exc)}
        ready = ready and ok
        shown[name] = {"ready": ok, **details}
    return ready, shown


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


def _app() -> Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]:
    metrics = make_wsgi_app(REGISTRY)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            return _json(start_response, 200, {"status": "alive"})
        if path == "/readyz":
            ready, checks = readiness()
            body = {"status": "ready" if ready else "not_ready", "checks": checks}
            return _json(start_response, 200 if ready else 503, body)
        result: Iterable[bytes] = metrics(environ, start_response)
        return result

    return app


def _json(start_response: Callable[..., Any], status: int, body: Any) -> list[bytes]:
    text = json.dumps(body).encode()
    reason = "OK" if status == 200 else "Service Unavailable"
    start_response(
        f"{status} {reason}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(text)))],
    )
    return [text]


def serve(port: int, host: str) -> tuple[ThreadingWSGIServer, threading.Thread]:
    """Serve ``/metrics`` (the default registry), ``/healthz`` and ``/readyz`` in a thread."""
    server = make_server(host, port, _app(), ThreadingWSGIServer, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, name="disco-metrics", daemon=True)
    thread.start()
    return server, thread
