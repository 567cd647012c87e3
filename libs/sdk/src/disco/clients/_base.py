"""What every typed client of a disco HTTP service shares.

- one ``httpx.AsyncClient`` per client, created in ``start()`` (idempotent) or
  ``async with``;
- a bearer token from a :class:`TokenProvider`: a token the operator gave
  (``DISCO_AUTH_TOKEN``) or, in dev, one minted from ``DISCO_AUTH_SECRET``;
- inside a bus handler, the tenant and user of the envelope being handled are
  sent as on-behalf-of headers, so a platform agent's calls are scoped to the
  tenant it is working for (the services honour them only for the ``service``
  role); elsewhere :func:`acting_for` sets them (a service serving a caller);
- the services' stable error shape becomes a :class:`ServiceError` subclass with
  the same ``code``, ``message`` and ``details``;
- connection failures and 502/503/504 are retried for idempotent requests.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any, Self, TypeVar, overload

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from disco._context import maybe_current_context
from disco._lifecycle import StartStop
from disco.auth import TokenProvider
from disco.bus import DependencyUnavailableError
from disco.settings import ServiceClientSettings
from disco_common.auth import ON_BEHALF_OF_TENANT_HEADER, ON_BEHALF_OF_USER_HEADER
from disco_common.errors import ErrorResponse

__all__ = [
    "ServiceAuthError",
    "ServiceClient",
    "ServiceConflictError",
    "ServiceError",
    "ServiceNotFoundError",
    "ServiceUnavailableError",
    "ServiceValidationError",
    "acting_for",
]

ModelT = TypeVar("ModelT")

_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

_ACTING_FOR: ContextVar[tuple[str, str | None] | None] = ContextVar(
    "disco_clients_acting_for", default=None
)


@contextlib.contextmanager
def acting_for(tenant_id: str, user_id: str | None = None) -> Iterator[None]:
    """Scope the service calls made inside the block to ``tenant_id`` (and ``user_id``).

    For a service that calls another on behalf of its own caller (the gateway
    reading the registry for the tenant of a request): the calls carry the
    on-behalf-of headers, which the services honour for a ``service``-role token
    only. It wins over the envelope being handled.
    """
    token = _ACTING_FOR.set((tenant_id, user_id))
    try:
        yield
    finally:
        _ACTING_FOR.reset(token)


_RETRY_STATUSES = frozenset({502, 503, 504})


class ServiceError(Exception):
    """A disco service answered with an error (or could not be reached).

    ``code``, ``message`` and ``details`` are the service's stable error shape.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Any = None,
        *,
        method: str = "",
        url: str = "",
    ) -> None:
        super().__init__(f"{method} {url} -> {status} {code}: {message}".strip())
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.method = method
        self.url = url


class ServiceNotFoundError(ServiceError):
    """404: what was asked for does not exist (or belongs to another tenant)."""


class ServiceConflictError(ServiceError):
    """409: a conflicting write, e.g. a stale version or an immutable schema."""


class ServiceValidationError(ServiceError):
    """400/413/422: the request was malformed; ``details`` lists the violations."""


class ServiceAuthError(ServiceError):
    """401/403: the token is missing, invalid or lacks a role."""


class ServiceUnavailableError(ServiceError, DependencyUnavailableError):
    """The service could not be reached or is not ready (connection error, 503).

    Raised in a bus handler (and not caught), it makes the consumer try the envelope
    again until the service is back, instead of dead-lettering it."""


def _error_class(status: int) -> type[ServiceError]:
    if status == 404:
        return ServiceNotFoundError
    if status == 409:
        return ServiceConflictError
    if status in {400, 413, 422}:
        return ServiceValidationError
    if status in {401, 403}:
        return ServiceAuthError
    if status in _RETRY_STATUSES:
        return ServiceUnavailableError
    return ServiceError


_JSON_CONTENT = {"Content-Type": "application/json"}


def _encoded(body: Any) -> tuple[bytes | None, Any]:
    """httpx's ``content`` and ``json`` arguments for ``body``.

    A model is serialised by pydantic-core (the same JSON as ``model_dump(mode=
    "json")`` then ``json.dumps``, about fifteen times faster: a 384-number vector
    took 225 us that way); anything else (a dict, a list) goes to httpx as it is.
    The whole model, defaults included: a field filled in place after the model
    was built (context.sub_tasks[...] = ...) counts as "unset" to pydantic and
    would otherwise vanish. Partial updates pass the dict they mean to send.
    """
    if isinstance(body, BaseModel):
        return body.model_dump_json().encode(), None
    return None, body


class ServiceClient(StartStop):
    """Base of the typed service clients; subclasses add one method per endpoint."""

    service_name = "service"

    def __init__(
        self,
        base_url: str,
        *,
        token: TokenProvider | None = None,
        timeout_seconds: float = 10.0,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._timeout = timeout_seconds
        self._retries = retries
        self._transport = transport
        self._http: httpx.AsyncClient | None = None

    @classmethod
    def from_settings(
        cls,
        settings: ServiceClientSettings | None = None,
        *,
        token: TokenProvider | None = None,
    ) -> Self:
        """A client for the service's URL in ``settings`` (from ``DISCO_*`` when not given).

        Its token comes from ``token``, else from the settings
        (:meth:`ServiceClientSettings.token_provider`).
        """
        settings = settings if settings is not None else ServiceClientSettings()
        # DISCO_<SERVICE>_URL: the settings have a URL field per service.
        url = getattr(settings, f"{cls.service_name}_url", None)
        if not isinstance(url, str):
            raise TypeError(
                f"{cls.__name__} is not a client of a service the settings name; "
                f"build it with its URL: {cls.__name__}(base_url, ...)"
            )
        return cls(
            url,
            token=token if token is not None else settings.token_provider(),
            timeout_seconds=settings.http_timeout_seconds,
            retries=settings.http_retries,
        )

    async def start(self) -> None:
        """Open the connection pool. Idempotent."""
        if self._http is None:
            self._http = httpx.AsyncClient(
                base_url=self.base_url, timeout=self._timeout, transport=self._transport
            )

    async def stop(self) -> None:
        """Close the connection pool. Idempotent."""
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    def _require_http(self) -> httpx.AsyncClient:
        if self._http is None:
            raise RuntimeError(
                f"{type(self).__name__} is not started: call `await client.start()` or use "
                "`async with client:` first"
            )
        return self._http

    async def _headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {await self._token.token()}"
        acting = _ACTING_FOR.get()
        context = maybe_current_context()
        if acting is not None:
            headers[ON_BEHALF_OF_TENANT_HEADER] = acting[0]
            if acting[1]:
                headers[ON_BEHALF_OF_USER_HEADER] = acting[1]
        elif context is not None:
            if context.envelope.tenant_id:
                headers[ON_BEHALF_OF_TENANT_HEADER] = context.envelope.tenant_id
            if context.envelope.user_id:
                headers[ON_BEHALF_OF_USER_HEADER] = context.envelope.user_id
        return headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Send one request; raise a :class:`ServiceError` for any error answer."""
        http = self._require_http()
        method = method.upper()
        query = {k: v for k, v in (params or {}).items() if v is not None}
        attempts = 1 + (self._retries if method in _IDEMPOTENT else 0)
        url = f"{self.base_url}{path}"
        content, payload = _encoded(json)
        for attempt in range(1, attempts + 1):
            request_headers = {**await self._headers(), **(headers or {})}
            if content is not None:
                request_headers.update(_JSON_CONTENT)
            try:
                response = await http.request(
                    method,
                    path,
                    content=content,
                    json=payload,
                    params=query,
                    headers=request_headers,
                )
            except httpx.TransportError as exc:
                if attempt < attempts:
                    await asyncio.sleep(0.1 * 2 ** (attempt - 1))
                    continue
                raise ServiceUnavailableError(
                    503,
                    "unavailable",
                    f"the {self.service_name} service at {self.base_url} could not be reached "
                    f"({type(exc).__name__}: {exc}); is it running (`disco dev up`)?",
                    method=method,
                    url=url,
                ) from exc
            if response.status_code in _RETRY_STATUSES and attempt < attempts:
                await asyncio.sleep(0.1 * 2 ** (attempt - 1))
                continue
            if response.status_code >= 400:
                raise self._error(response, method, url)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, response: httpx.Response, method: str, url: str) -> ServiceError:
        kind = _error_class(response.status_code)
        try:
            body = ErrorResponse.model_validate_json(response.content).error
            return kind(
                response.status_code, body.code, body.message, body.details, method=method, url=url
            )
        except ValidationError:
            text = response.text[:500]
            return kind(response.status_code, "http_error", text, method=method, url=url)

    @overload
    async def call(
        self,
        method: str,
        path: str,
        result: type[ModelT],
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> ModelT: ...

    @overload
    async def call(
        self,
        method: str,
        path: str,
        result: None = None,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> None: ...

    async def call(
        self,
        method: str,
        path: str,
        result: type[ModelT] | None = None,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> ModelT | None:
        """Send a request and parse its JSON answer as ``result`` (None: no body)."""
        response = await self.request(method, path, json=json, params=params)
        if result is None:
            return None
        return _adapter(result).validate_json(response.content)

    async def call_or_none(
        self,
        method: str,
        path: str,
        result: type[ModelT],
        *,
        params: Mapping[str, Any] | None = None,
    ) -> ModelT | None:
        """Like :meth:`call`, but ``None`` when the service answers 404."""
        try:
            return await self.call(method, path, result, params=params)
        except ServiceNotFoundError:
            return None


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(kind: type[ModelT]) -> TypeAdapter[ModelT]:
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        adapter = _ADAPTERS[kind] = TypeAdapter(kind)
    return adapter
