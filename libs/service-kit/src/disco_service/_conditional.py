"""JSON that clients may keep and revalidate: ``ETag``, ``Cache-Control``, ``Last-Modified``,
and ``304 Not Modified`` for an ``If-None-Match`` that names the current ``ETag``.

The ``ETag`` is strong, the SHA-256 of the exact bytes served: equal bodies have
equal tags on every instance, whatever served them. ``If-None-Match`` is
compared weakly, as RFC 9110 says (``W/"x"`` matches ``"x"``; ``*`` matches
anything). ``If-Modified-Since`` is not honoured: a body may change without its
``Last-Modified`` moving (a setting of the service), and the ``ETag`` sees it.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["NOT_MODIFIED_RESPONSE", "cacheable_body", "cacheable_json", "entity_tag"]

NOT_MODIFIED_RESPONSE: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not modified: the `If-None-Match` names the current `ETag`."}
}
"""What a route answering with :func:`cacheable_json` declares besides its 200."""

_JSON = "application/json"


def entity_tag(body: bytes) -> str:
    """The strong entity tag of ``body`` (quoted, as the ``ETag`` header carries it)."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=")
    return f'"{digest.decode("ascii")}"'


def _matches(if_none_match: str, tag: str) -> bool:
    """Whether an ``If-None-Match`` value names ``tag`` (weak comparison)."""
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*":
            return True
        if candidate.removeprefix("W/") == tag:
            return True
    return False


def cacheable_json(
    request: Request,
    content: BaseModel,
    *,
    max_age_seconds: int,
    private: bool,
    last_modified: datetime | None = None,
    vary: str | None = None,
) -> Response:
    """``content`` as its JSON (camelCase aliases, no nulls), with caching headers; a bodiless
    304 when the request's ``If-None-Match`` names its ``ETag``.

    Args:
        max_age_seconds: how long a client may use it without revalidating.
        private: only the caller's own cache may keep it (it depends on who asks).
        last_modified: when what it shows last changed, if known.
        vary: the request headers the body depends on (``Authorization``).
    """
    body = content.__pydantic_serializer__.to_json(content, by_alias=True, exclude_none=True)
    return cacheable_body(
        request,
        body,
        max_age_seconds=max_age_seconds,
        private=private,
        last_modified=last_modified,
        vary=vary,
    )


def cacheable_body(
    request: Request,
    body: bytes,
    *,
    max_age_seconds: int,
    private: bool,
    last_modified: datetime | None = None,
    vary: str | None = None,
    media_type: str = _JSON,
) -> Response:
    """:func:`cacheable_json` of a body made already (``media_type``: its type)."""
    tag = entity_tag(body)
    headers = {
        "ETag": tag,
        "Cache-Control": f"{'private' if private else 'public'}, max-age={max_age_seconds}",
    }
    if last_modified is not None:
        headers["Last-Modified"] = format_datetime(last_modified.astimezone(UTC), usegmt=True)
    if vary is not None:
        headers["Vary"] = vary
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None and _matches(if_none_match, tag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media_type, headers=headers)
