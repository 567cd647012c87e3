"""The operations routes (unauthenticated): liveness, readiness and metrics.

``/healthz`` answers as long as the process serves HTTP. ``/readyz`` checks
every dependency (the database with ``SELECT 1``, Kafka with a metadata round
trip, plus any check a service added) concurrently, each within
``DISCO_READINESS_TIMEOUT_SECONDS``, on every call: nothing is cached, so the
answer follows a dependency going away and coming back. ``/metrics`` serves the
app's Prometheus registry (:class:`~disco_service.ServiceMetrics`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Literal

import structlog
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field

from disco_common.errors import ErrorCode
from disco_service._errors import error_response, error_responses
from disco_service._state import ReadinessCheck, get_state

__all__ = ["CheckResult", "Liveness", "Readiness", "operations_router"]

log = structlog.get_logger("disco_service.health")


class Liveness(BaseModel):
    """The process is alive."""

    status: Literal["ok"] = "ok"
    service: str


class CheckResult(BaseModel):
    """The outcome of one dependency check."""

    ok: bool
    latency_ms: float
    error: str | None = None


class Readiness(BaseModel):
    """Every dependency answered."""

    status: Literal["ready"] = "ready"
    service: str
    checks: dict[str, CheckResult] = Field(default_factory=dict)


operations_router = APIRouter(tags=["operations"])


@operations_router.get("/healthz", response_model=Liveness, summary="Liveness")
async def healthz(request: Request) -> Liveness:
    """200 while the process serves requests."""
    return Liveness(service=get_state(request).settings.service_name)


async def _run_check(name: str, check: ReadinessCheck, timeout: float) -> CheckResult:  # noqa: ASYNC109
    started = time.perf_counter()
    error: str | None
    try:
        async with asyncio.timeout(timeout):
            await check()
    except TimeoutError:
        error = f"no answer within {timeout:g}s"
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    else:
        error = None
    latency_ms = round((time.perf_counter() - started) * 1000, 2)
    if error is not None:
        log.warning("readiness_check_failed", dependency=name, error=error)
    return CheckResult(ok=error is None, latency_ms=latency_ms, error=error)


@operations_router.get(
    "/readyz",
    response_model=Readiness,
    summary="Readiness",
    responses=error_responses(503),
)
async def readyz(request: Request) -> Readiness | JSONResponse:
    """200 when the database and Kafka answer; 503 naming what failed otherwise."""
    state = get_state(request)
    timeout = state.settings.readiness_timeout_seconds
    names = list(state.readiness_checks)
    results = await asyncio.gather(
        *(_run_check(name, state.readiness_checks[name], timeout) for name in names)
    )
    checks = dict(zip(names, results, strict=True))
    for name, result in checks.items():
        state.metrics.readiness.labels(dependency=name).set(1 if result.ok else 0)
    failed = [name for name, result in checks.items() if not result.ok]
    if failed:
        return error_response(
            503,
            ErrorCode.UNAVAILABLE.value,
            f"Not ready: {', '.join(failed)} unavailable.",
            {
                "failed": list(failed),
                "checks": {name: result.model_dump(mode="json") for name, result in checks.items()},
            },
        )
    return Readiness(service=state.settings.service_name, checks=checks)


@operations_router.get(
    "/metrics",
    response_class=Response,
    summary="Prometheus metrics",
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Metrics."}},
)
async def metrics(request: Request) -> Response:
    """The service's metrics in the Prometheus text format (unauthenticated)."""
    return Response(get_state(request).metrics.render(), media_type=CONTENT_TYPE_LATEST)
