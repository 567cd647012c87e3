"""The gateway's settings, the push URL policy, and where a push delivery connects."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trustme
from a2a.types import a2a_pb2

from disco_gateway import GatewaySettings
from disco_gateway.push.sender import Outcome, PushPoster
from disco_gateway.push.urls import PushUrlPolicy


def test_public_agents_are_read_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCO_GATEWAY_PUBLIC_AGENTS", "hello, assistant ,")
    monkeypatch.setenv("DISCO_GATEWAY_PUBLIC_URL", "https://agents.example.com")

    settings = GatewaySettings()

    assert settings.gateway_public_agents == ("hello", "assistant")
    assert settings.is_public_agent("hello")
    assert not settings.is_public_agent("secret")
    assert settings.gateway_public_url == "https://agents.example.com"


@pytest.mark.parametrize(
    ("env", "address"),
    [
        ({}, None),  # no gRPC port: no gRPC binding
        ({"DISCO_GATEWAY_GRPC_PORT": "8090"}, "agents.example.com:8090"),
        (
            {"DISCO_GATEWAY_GRPC_PORT": "8090", "DISCO_GATEWAY_PUBLIC_URL": "http://[::1]:8080"},
            "[::1]:8090",
        ),
        (
            {
                "DISCO_GATEWAY_GRPC_PORT": "8090",
                "DISCO_GATEWAY_GRPC_PUBLIC_ADDRESS": "grpc.agents.example.com:443",
            },
            "grpc.agents.example.com:443",
        ),
    ],
)
def test_cards_name_the_grpc_address_callers_reach(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], address: str | None
) -> None:
    monkeypatch.setenv("DISCO_GATEWAY_PUBLIC_URL", "https://agents.example.com")
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    assert GatewaySettings().gateway_grpc_address == address


@pytest.mark.parametrize("setting", [{"push_allow_loopback": True}, {"card_visibility": "all"}])
def test_dev_only_settings_are_refused_in_production(setting: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="dev"):
        GatewaySettings(env="production", auth_secret="x" * 40, **setting)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "loopback", "accepted"),
    [
        ("http://127.0.0.1:9000/hook", True, True),
        ("http://127.0.0.1:9000/hook", False, False),
        ("http://localhost/hook", True, True),
        ("http://10.0.0.7/hook", True, False),
        ("http://192.168.1.1/hook", True, False),
        ("http://169.254.169.254/latest/meta-data", True, False),
        ("http://[::1]:8080/hook", True, True),
        ("file:///etc/passwd", True, False),
        ("http://93.184.216.34/hook", False, True),
        ("http://[::ffff:10.0.0.7]/hook", True, False),
        ("http://[::ffff:127.0.0.1]/hook", False, False),
        ("http://0.0.0.0/hook", True, False),
        ("http://100.64.0.1/hook", True, False),
        ("http:///hook", True, False),
        ("http://[::1/hook", True, False),
    ],
)
async def test_push_urls_go_to_public_addresses_or_loopback_when_allowed(
    url: str, loopback: bool, accepted: bool
) -> None:
    assert await PushUrlPolicy(allow_loopback=loopback).allows(url) is accepted


async def test_a_target_names_the_checked_address_and_keeps_the_host_for_the_request() -> None:
    target = await PushUrlPolicy(allow_loopback=False).target("https://93.184.216.34:8443/a?b=1")
    named = await PushUrlPolicy(allow_loopback=True).target("http://localhost:9000/hook")

    assert target is not None
    assert (target.url, target.host, target.server_name) == (
        "https://93.184.216.34:8443/a?b=1",
        "93.184.216.34:8443",
        "93.184.216.34",
    )
    assert named is not None
    assert named.url in ("http://127.0.0.1:9000/hook", "http://[::1]:9000/hook")
    assert (named.host, named.server_name) == ("localhost:9000", "localhost")


# -- where a delivery connects ------------------------------------------------------------

REBINDING_HOST = "hooks.rebind.test"


class Receiver:
    """A one-response-per-connection HTTP server on 127.0.0.1 that keeps each request head."""

    def __init__(self) -> None:
        self.heads: list[str] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        length = next(
            (int(line.split(":", 1)[1]) for line in head.split("\r\n")
             if line.lower().startswith("content-length:")),
            0,
        )  # fmt: skip
        await reader.readexactly(length)
        self.heads.append(head)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()


@asynccontextmanager
async def receiving(tls: ssl.SSLContext | None = None) -> AsyncIterator[tuple[Receiver, int]]:
    receiver = Receiver()
    server = await asyncio.start_server(receiver.handle, "127.0.0.1", 0, ssl=tls)
    try:
        yield receiver, server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def rebinding_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``REBINDING_HOST`` resolves to 127.0.0.1 once, then to 127.0.0.3, where nothing listens.

    A client that resolved the name again after the check would connect there
    and be refused. Returns the names asked, in order.
    """
    loop = asyncio.get_running_loop()
    resolve = loop.getaddrinfo
    asked: list[str] = []

    async def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != REBINDING_HOST:
            return await resolve(host, port, *args, **kwargs)
        address = "127.0.0.1" if REBINDING_HOST not in asked else "127.0.0.3"
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port)))]

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    return asked


def poster(http: httpx.AsyncClient) -> PushPoster:
    return PushPoster(http, PushUrlPolicy(allow_loopback=True))


def config(url: str) -> a2a_pb2.TaskPushNotificationConfig:
    return a2a_pb2.TaskPushNotificationConfig(id="c", task_id="t", url=url, token="secret")


async def test_a_delivery_connects_to_the_address_its_check_resolved(
    rebinding_dns: list[str],
) -> None:
    async with receiving() as (receiver, port), httpx.AsyncClient(timeout=5) as http:
        url = f"http://{REBINDING_HOST}:{port}/hook"
        outcome = await poster(http).attempt(config(url), {"n": 1}, task_id="t")

    assert outcome is Outcome.DELIVERED
    assert rebinding_dns == [REBINDING_HOST]
    [head] = receiver.heads
    assert head.startswith("POST /hook HTTP/1.1\r\n")
    assert f"\r\nhost: {REBINDING_HOST}:{port}\r\n" in head.lower()
    assert "\r\nx-a2a-notification-token: secret\r\n" in head.lower()


async def test_a_delivery_tries_the_next_checked_address_when_one_refuses_the_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    resolve = loop.getaddrinfo

    async def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != REBINDING_HOST:
            return await resolve(host, port, *args, **kwargs)
        # Nothing listens on the first (as an unreachable IPv6 address would be).
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.3", int(port))),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", int(port))),
        ]

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    async with receiving() as (receiver, port), httpx.AsyncClient(timeout=5) as http:
        url = f"http://{REBINDING_HOST}:{port}/hook"
        outcome = await poster(http).attempt(config(url), {"n": 1}, task_id="t")

    assert outcome is Outcome.DELIVERED
    assert len(receiver.heads) == 1


async def test_a_delivery_over_tls_checks_the_certificate_against_the_urls_host(
    rebinding_dns: list[str],
) -> None:
    authority = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(REBINDING_HOST).configure_cert(server_tls)
    client_tls = ssl.create_default_context()
    authority.configure_trust(client_tls)

    async with (
        receiving(server_tls) as (receiver, port),
        httpx.AsyncClient(timeout=5, verify=client_tls) as http,
    ):
        url = f"https://{REBINDING_HOST}:{port}/hook"
        outcome = await poster(http).attempt(config(url), {"n": 1}, task_id="t")

    assert outcome is Outcome.DELIVERED
    assert rebinding_dns == [REBINDING_HOST]
    assert len(receiver.heads) == 1
