"""``GET /v1/asyncapi``: the AsyncAPI 3.0 document of the caller's bus, JSON or YAML,
with an ETag that changes exactly when the document does."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response, status

from disco_common.asyncapi import (
    ASYNCAPI_JSON_MEDIA_TYPE,
    ASYNCAPI_YAML_MEDIA_TYPE,
    AsyncApiFormat,
    AsyncApiQuery,
)
from disco_registry.asyncapi.document import DocumentSettings
from disco_registry.asyncapi.service import bus_document
from disco_registry.state import RegistryState
from disco_service import IdentityDep, error_responses

__all__ = ["router"]

router = APIRouter(prefix="/v1/asyncapi", tags=["asyncapi"], responses=error_responses(401, 403))

_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
# Per caller (the document is the token's tenant's), and always revalidated: an
# If-None-Match costs no build while the document holds.
_CACHE_CONTROL = "private, no-cache"
_VARY = "Accept, Authorization"
# The same document in either form (https://www.asyncapi.com/docs/reference/specification/v3.0.0).
_DOCUMENT_SCHEMA = {
    "type": "object",
    "description": "An AsyncAPI 3.0.0 document.",
    "required": ["asyncapi", "info", "channels", "operations", "components"],
    "properties": {"asyncapi": {"const": "3.0.0"}},
}


def _wants_yaml(query: AsyncApiQuery, accept: str | None) -> bool:
    if query.format is not None:
        return query.format == AsyncApiFormat.YAML
    if not accept:
        return False
    media_types = [part.split(";", 1)[0].strip().lower() for part in accept.split(",")]
    return any(media_type in _YAML_TYPES for media_type in media_types)


def _matches(if_none_match: str | None, etag: str) -> bool:
    """Whether ``If-None-Match`` names ``etag`` (weak comparison, as GET uses)."""
    if not if_none_match:
        return False
    for candidate in if_none_match.split(","):
        tag = candidate.strip()
        if tag == "*" or tag.removeprefix("W/") == etag:
            return True
    return False


@router.get(
    "",
    response_class=Response,
    responses={
        200: {
            "description": "The AsyncAPI 3.0 document",
            "content": {
                ASYNCAPI_JSON_MEDIA_TYPE: {"schema": _DOCUMENT_SCHEMA},
                ASYNCAPI_YAML_MEDIA_TYPE: {"schema": _DOCUMENT_SCHEMA},
            },
        },
        304: {"description": "The document named in If-None-Match has not changed"},
        **error_responses(404, 422),
    },
    summary="The AsyncAPI 3.0 document of your bus",
)
async def get_asyncapi(
    request: Request,
    identity: IdentityDep,
    query: Annotated[AsyncApiQuery, Query()],
    accept: Annotated[str | None, Header()] = None,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    """Topics (and their `.dlq`), one message per registered event type with its payload
    schema, and what every live agent you can see sends and receives, as of now.
    `agent` and `event_type` narrow it (404 when no live agent has that name or defines
    that event type). The ETag changes exactly when the document does: send it back in
    If-None-Match for a 304."""
    state = RegistryState.of(request)
    settings = state.settings
    built = await bus_document(
        state.require_database().engine,
        state.asyncapi_cache,
        DocumentSettings(
            tenant_id=identity.tenant_id,
            topic_prefix=settings.topic_prefix,
            bootstrap=settings.asyncapi_bootstrap,
            security_protocol=settings.kafka_security_protocol,
            sasl_mechanism=settings.kafka_sasl_mechanism,
        ),
        user_id=identity.user_id,
        agent=query.agent,
        event_type=query.event_type,
    )
    yaml = _wants_yaml(query, accept)
    etag = f'"{built.digest}-yaml"' if yaml else f'"{built.digest}"'
    headers = {"ETag": etag, "Cache-Control": _CACHE_CONTROL, "Vary": _VARY}
    if _matches(if_none_match, etag):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)
    if yaml:
        return Response(
            await built.yaml_text(), media_type=ASYNCAPI_YAML_MEDIA_TYPE, headers=headers
        )
    return Response(built.json, media_type=ASYNCAPI_JSON_MEDIA_TYPE, headers=headers)
