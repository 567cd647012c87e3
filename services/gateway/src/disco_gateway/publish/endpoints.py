"""``POST /v1/publish``: the HTTP publish bridge for clients that cannot speak Kafka."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from disco_gateway.publish.schemas import Published, PublishRequest
from disco_gateway.scope import CallScope
from disco_gateway.state import GatewayState
from disco_service import IdentityDep, error_responses

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["publish"], responses=error_responses(401, 403))


@router.post(
    "/publish",
    response_model=Published,
    response_model_exclude_none=True,
    status_code=202,
    responses={
        200: {"model": Published, "description": "With wait: the response came"},
        **error_responses(400, 409, 413, 429, 504),
    },
    summary="Publish an event (and wait for its response)",
)
async def publish(
    request: Request,
    body: PublishRequest,
    identity: IdentityDep,
    response: Response,
    wait: Annotated[
        float | None,
        Query(gt=0, description="Seconds to wait for the response to a request (action-requests)."),
    ] = None,
) -> Published:
    """Put an event on the bus as the caller's tenant and user; its id comes back (202).
    A request on ``action-requests`` must name ``response_event`` and fit the schema
    registered for its type (422 listing the violations). With ``wait`` the correlated
    response comes back too (200), or 504 when it did not come in time; 409 when the
    tenant's other request still waits on the same ``correlation_id``."""
    state = GatewayState.of(request)
    await state.call_limits.count(CallScope(identity), None)
    if wait is not None:
        wait = min(wait, state.settings.publish_max_wait_seconds)
        response.status_code = 200
    return await state.require_a2a().publisher.publish(identity, body, wait=wait)
