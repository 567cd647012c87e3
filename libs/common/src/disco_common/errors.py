"""The one error shape every disco HTTP service answers with.

``{"error": {"code": "...", "message": "...", "details": ...}}`` — ``code`` is
stable and machine-readable, ``message`` is for people, ``details`` carries
structure (for a 422, the list of violations).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = ["ErrorBody", "ErrorCode", "ErrorResponse"]


class ErrorCode(StrEnum):
    """Codes shared by every service. Services add their own domain codes."""

    BAD_REQUEST = "bad_request"
    INVALID_CURSOR = "invalid_cursor"
    VALIDATION_FAILED = "validation_failed"
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    CONFLICT = "conflict"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    REQUEST_TIMEOUT = "request_timeout"
    RATE_LIMITED = "rate_limited"
    INTERNAL = "internal_error"
    UNAVAILABLE = "unavailable"


class ErrorBody(BaseModel):
    """What went wrong."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(min_length=1, max_length=100, description="Stable, machine-readable code.")
    message: str = Field(description="For people: what happened and, where known, what to do.")
    details: JsonValue = Field(default=None, description="Structured detail, e.g. violations.")


class ErrorResponse(BaseModel):
    """The body of every error response."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorBody
