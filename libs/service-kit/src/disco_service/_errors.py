"""One error base class, one error shape, one set of handlers.

Every error a disco service answers with is ``{"error": {"code", "message",
"details"}}`` (:class:`disco_common.errors.ErrorResponse`): errors services
raise, Starlette/FastAPI's own (404, 405, 422), the body limit (413) and
anything unexpected (500, logged with the request id, nothing internal leaked).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import JsonValue
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from disco.clients import ServiceUnavailableError
from disco_common.errors import ErrorBody, ErrorCode, ErrorResponse
from disco_service._faults import database_unavailable, sqlstate_of

__all__ = [
    "BadRequest",
    "Conflict",
    "DiscoHTTPError",
    "Forbidden",
    "NotFound",
    "PayloadTooLarge",
    "ServiceUnavailable",
    "Unauthenticated",
    "UnprocessableEntity",
    "error_response",
    "error_responses",
    "install_error_handlers",
]

log = structlog.get_logger("disco_service.errors")

_CODE_BY_STATUS: dict[int, ErrorCode] = {
    400: ErrorCode.BAD_REQUEST,
    401: ErrorCode.UNAUTHENTICATED,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    408: ErrorCode.REQUEST_TIMEOUT,
    409: ErrorCode.CONFLICT,
    413: ErrorCode.PAYLOAD_TOO_LARGE,
    415: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
    422: ErrorCode.VALIDATION_FAILED,
    429: ErrorCode.RATE_LIMITED,
    500: ErrorCode.INTERNAL,
    503: ErrorCode.UNAVAILABLE,
}

_DESCRIPTION_BY_STATUS: dict[int, str] = {
    400: "Bad request",
    401: "Missing, invalid or expired bearer token",
    403: "The caller lacks a required role",
    404: "Not found",
    405: "Method not allowed",
    408: "The request was not received in time",
    409: "Conflict with the current state",
    413: "Request body too large",
    415: "Unsupported media type",
    422: "Validation failed",
    429: "Too many requests",
    500: "Internal error",
    503: "A dependency is unavailable",
}

# Postgres SQLSTATE for a unique-key violation: an expected conflict, never a 500.
_UNIQUE_VIOLATION = "23505"


def code_for_status(status: int) -> str:
    """The stable error code for an HTTP status."""
    code = _CODE_BY_STATUS.get(status)
    if code is not None:
        return code.value
    return ErrorCode.BAD_REQUEST.value if status < 500 else ErrorCode.INTERNAL.value


class DiscoHTTPError(Exception):
    """An error that becomes an HTTP response with the stable shape.

    Raise it (or a subclass) from a route or a service; the handler renders
    ``{"error": {"code", "message", "details"}}`` with :attr:`status_code`.
    Domain code may subclass with its own ``code`` (e.g. ``"agent_exists"``).
    """

    status_code: int = 500
    code: str = ErrorCode.INTERNAL.value

    def __init__(
        self,
        message: str,
        *,
        details: JsonValue = None,
        code: str | None = None,
        status_code: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        if code is not None:
            self.code = code
        if status_code is not None:
            self.status_code = status_code
        self.headers = dict(headers or {})

    def to_body(self) -> ErrorResponse:
        """The response body."""
        return ErrorResponse(
            error=ErrorBody(code=self.code, message=self.message, details=self.details)
        )


class BadRequest(DiscoHTTPError):
    """400: the request cannot be understood."""

    status_code = 400
    code = ErrorCode.BAD_REQUEST.value


class Unauthenticated(DiscoHTTPError):
    """401: no valid bearer token; carries ``WWW-Authenticate: Bearer``."""

    status_code = 401
    code = ErrorCode.UNAUTHENTICATED.value

    def __init__(
        self, message: str, *, details: JsonValue = None, error: str | None = None
    ) -> None:
        challenge = "Bearer"
        if error:
            # RFC 6750 §3: tell the client why, without echoing the token.
            description = message.replace('"', "'")
            challenge += f' error="{error}", error_description="{description}"'
        super().__init__(message, details=details, headers={"WWW-Authenticate": challenge})


class Forbidden(DiscoHTTPError):
    """403: authenticated, but not allowed."""

    status_code = 403
    code = ErrorCode.FORBIDDEN.value


class NotFound(DiscoHTTPError):
    """404: nothing there (or nothing this tenant may see)."""

    status_code = 404
    code = ErrorCode.NOT_FOUND.value


class Conflict(DiscoHTTPError):
    """409: the request conflicts with the current state (a duplicate, a stale version)."""

    status_code = 409
    code = ErrorCode.CONFLICT.value


class PayloadTooLarge(DiscoHTTPError):
    """413: the request body is larger than ``DISCO_MAX_BODY_BYTES``."""

    status_code = 413
    code = ErrorCode.PAYLOAD_TOO_LARGE.value


class UnprocessableEntity(DiscoHTTPError):
    """422: well-formed but semantically invalid (e.g. a payload failing its schema)."""

    status_code = 422
    code = ErrorCode.VALIDATION_FAILED.value


class ServiceUnavailable(DiscoHTTPError):
    """503: a dependency (database, broker) is unavailable."""

    status_code = 503
    code = ErrorCode.UNAVAILABLE.value


def error_response(
    status_code: int,
    code: str,
    message: str,
    details: JsonValue = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A JSON response with the stable error shape."""
    body = ErrorResponse(error=ErrorBody(code=code, message=message, details=details))
    return JSONResponse(
        body.model_dump(mode="json"), status_code=status_code, headers=dict(headers or {})
    )


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` declaring ``statuses`` with the :class:`ErrorResponse` model.

    ``@router.get("/x/{id}", responses=error_responses(404, 409))``, or for a
    whole authenticated router ``APIRouter(responses=error_responses(401, 403))``.
    Every kit app already declares 422 and 500 on all routes.
    """
    return {
        status: {
            "model": ErrorResponse,
            "description": _DESCRIPTION_BY_STATUS.get(status, "Error"),
        }
        for status in statuses
    }


def _violations(exc: RequestValidationError) -> list[JsonValue]:
    violations: list[JsonValue] = []
    for error in exc.errors():
        violations.append(
            {
                "location": [str(part) for part in error.get("loc", ())],
                "message": str(error.get("msg", "")),
                "type": str(error.get("type", "")),
            }
        )
    return violations


async def _disco_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DiscoHTTPError)
    return error_response(exc.status_code, exc.code, exc.message, exc.details, exc.headers)


async def _http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    message = exc.detail or _DESCRIPTION_BY_STATUS.get(exc.status_code, "HTTP error")
    # Our own HTTPException subclasses (the body limit) carry structured details.
    details: JsonValue = getattr(exc, "details", None)
    return error_response(
        exc.status_code, code_for_status(exc.status_code), message, details, exc.headers
    )


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(
        422,
        ErrorCode.VALIDATION_FAILED.value,
        "The request is not valid; see details for each violation.",
        _violations(exc),
    )


async def _integrity_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, IntegrityError)
    sqlstate = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
    if sqlstate == _UNIQUE_VIOLATION:
        # A duplicate the service did not check for first is still a conflict.
        return error_response(
            409, ErrorCode.CONFLICT.value, "A record with that key already exists."
        )
    log.error("integrity_error", exc_info=exc)
    return error_response(500, ErrorCode.INTERNAL.value, "Internal error.")


_RETRY_AFTER_SECONDS = 1
# 22021 character_not_in_repertoire (a NUL in text), 22P05 untranslatable_character
# (a \u0000 escape in jsonb): from a Python str, a NUL is the only cause of either.
_NUL_REFUSED = frozenset({"22021", "22P05"})
_NUL_CHARACTER = "nul_character"


def _unavailable(what: str, dependency: str) -> JSONResponse:
    """503: ``what`` is away (stalled, restarting, overloaded); say when to try again."""
    return error_response(
        503,
        ErrorCode.UNAVAILABLE.value,
        f"{what} is unavailable; retry shortly.",
        {"dependency": dependency, "retry_after_seconds": _RETRY_AFTER_SECONDS},
        {"Retry-After": str(_RETRY_AFTER_SECONDS)},
    )


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    if database_unavailable(exc):
        log.warning("database_unavailable", path=request.url.path, error=repr(exc))
        return _unavailable("The database", "database")
    if isinstance(exc, IntegrityError):
        return await _integrity_error(request, exc)
    if sqlstate_of(exc) in _NUL_REFUSED:
        # Valid JSON, but Postgres keeps no NUL in text or jsonb: the caller's data,
        # not the service, is what cannot be stored (the transaction rolled back).
        return error_response(
            422,
            _NUL_CHARACTER,
            "The request holds a NUL character (\\u0000), which cannot be stored; "
            "remove it or replace it (e.g. with U+FFFD).",
            {"reason": _NUL_CHARACTER},
        )
    log.error("database_error", exc_info=exc)
    return error_response(500, ErrorCode.INTERNAL.value, "Internal error.")


async def _upstream_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """Another disco service this one calls could not be reached, or was not ready."""
    assert isinstance(exc, ServiceUnavailableError)
    log.warning("upstream_unavailable", path=request.url.path, error=str(exc))
    # Which one, and where it lives, is the operator's business (logged), not the caller's.
    return _unavailable("A service this request needs", "service")


def install_error_handlers(app: FastAPI) -> None:
    """Make every error ``app`` answers with take the stable shape.

    Unexpected exceptions are turned into 500s by the request middleware (see
    :func:`disco_service.create_service_app`) so that they are logged once,
    with the request id, and never re-raised into the server.
    """
    app.add_exception_handler(DiscoHTTPError, _disco_error)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(IntegrityError, _integrity_error)
    # What a stalled or restarting database raises (see disco_service._faults).
    for kind in (DBAPIError, PoolTimeoutError, TimeoutError, ConnectionError):
        app.add_exception_handler(kind, _database_error)
    # What an SDK client raises when the service it calls is down (the gateway's registry).
    app.add_exception_handler(ServiceUnavailableError, _upstream_unavailable)
