"""What the gateway put on the wire, as a client received it: bytes recorded by an httpx
transport under the a2a-sdk client, read as the A2A JSON they carry; and a check that a
JSON document is exactly the specification's JSON of an A2A object."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message


@dataclass
class Exchange:
    """One HTTP request the client made and the response it got, its body as received."""

    method: str
    path: str
    request_headers: httpx.Headers
    request_body: bytes
    status: int
    headers: httpx.Headers
    body: bytearray = field(default_factory=bytearray)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def json(self) -> Any:
        """The body as JSON (a JSON body, or the ``data`` of each server-sent event)."""
        if self.content_type.startswith("text/event-stream"):
            return [
                json.loads(line[len("data:") :])
                for line in self.body.decode().splitlines()
                if line.startswith("data:")
            ]
        return json.loads(self.body)


class _Tee(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, into: bytearray) -> None:
        self._stream = stream
        self._into = into

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            self._into.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class RecordingTransport(httpx.AsyncBaseTransport):
    """An httpx transport that keeps a copy of every exchange, streamed bodies included
    (as the client reads them)."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        response = await self._inner.handle_async_request(request)
        exchange = Exchange(
            request.method, request.url.path, request.headers, body, response.status_code,
            response.headers,
        )  # fmt: skip
        self.exchanges.append(exchange)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, exchange.body),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()

    def posted(self, suffix: str = "") -> list[Exchange]:
        """The POST exchanges whose path ends with ``suffix``."""
        return [e for e in self.exchanges if e.method == "POST" and e.path.endswith(suffix)]


def spec_json(document: Any, kind: type[Message]) -> dict[str, Any]:
    """``document`` after checking that it is exactly the A2A JSON of a ``kind``: every
    member a field of the specification (camelCase), every enum its name, nothing else.

    It is parsed strictly (an unknown member fails) and written back: a member under
    another name (``snake_case``), an enum as a number, or a value in any other form
    than the protocol's JSON mapping comes back different.
    """
    assert isinstance(document, dict), document
    parsed = ParseDict(document, kind(), ignore_unknown_fields=False)
    canonical = MessageToDict(parsed)
    assert canonical == document, f"not the spec's JSON of {kind.__name__}:\n{document}"
    return document
