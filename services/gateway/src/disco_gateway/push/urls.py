"""Which push notification URLs the gateway posts to, and at which address.

The policy is the a2a-sdk's (``validate_push_notification_url``): http(s) only,
and a host that resolves to public addresses only (no private, shared,
loopback, link-local, multicast, reserved or unspecified range: no posting into
the gateway's own network, no cloud metadata endpoint).
``DISCO_GATEWAY_PUSH_ALLOW_LOOPBACK`` lets loopback through for development and
tests, and nothing else.

A delivery connects to the address that was checked, not to the host name: a
name resolved once for the check and again by the HTTP client could answer a
public address the first time and a private one the second (DNS rebinding).
The request keeps the URL's host in its ``Host`` header and, over TLS, as the
server name the certificate must match.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse
from dataclasses import dataclass

import httpx
import structlog

__all__ = ["PushTarget", "PushUrlPolicy"]

_log = structlog.get_logger("disco_gateway.push")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class PushTarget:
    """Where one delivery goes: ``urls`` name the checked addresses instead of the host,
    in the resolver's order."""

    urls: tuple[str, ...]
    host: str  # the URL's own host[:port], for the Host header
    server_name: str  # the URL's host name, for TLS (SNI and the certificate check)

    @property
    def url(self) -> str:
        """The first checked address's URL."""
        return self.urls[0]

    async def post(
        self, http: httpx.AsyncClient, body: object, headers: dict[str, str]
    ) -> httpx.Response:
        """POST ``body`` as JSON as a request to the URL's host, at the first checked
        address that takes the connection (a host with an IPv6 address this machine
        cannot reach may still have an IPv4 one that works)."""
        for url in self.urls[:-1]:
            try:
                return await self._post(http, url, body, headers)
            except httpx.ConnectError:
                continue
        return await self._post(http, self.urls[-1], body, headers)

    async def _post(
        self, http: httpx.AsyncClient, url: str, body: object, headers: dict[str, str]
    ) -> httpx.Response:
        return await http.post(
            url,
            json=body,
            headers={**headers, "Host": self.host},
            extensions={"sni_hostname": self.server_name},
        )


def _is_public(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # judged as the IPv4 address it carries
    return address.is_global and not (
        address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


class PushUrlPolicy:
    """Checks push URLs and resolves each delivery's address once.

    Args:
        allow_loopback: also accept hosts on loopback addresses (dev and tests).
    """

    def __init__(self, *, allow_loopback: bool) -> None:
        self._allow_loopback = allow_loopback

    async def allows(self, url: str) -> bool:
        """Whether the gateway may post to ``url`` (checked when a configuration is set)."""
        return await self.target(url) is not None

    async def target(self, url: str) -> PushTarget | None:
        """The checked address to post ``url``'s notifications to, or None if refused.

        Every address the host resolves to must pass, as in the a2a-sdk's policy;
        a delivery connects to them in turn until one takes the connection.
        """
        try:
            parsed = urllib.parse.urlparse(url)
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
            original = httpx.URL(url)
        except (ValueError, httpx.InvalidURL):
            _log.warning("push URL unparseable", url=url)
            return None
        host = parsed.hostname
        if parsed.scheme not in ("http", "https") or not host:
            _log.warning("push URL not http(s) with a host", url=url)
            return None
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
            addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
        except (OSError, ValueError):
            _log.warning("push URL host not resolved", url=url)
            return None
        if not addresses or not all(self._accepts(address) for address in addresses):
            _log.warning("push URL host resolves to a non-public address", url=url)
            return None
        return PushTarget(
            urls=tuple(
                dict.fromkeys(str(original.copy_with(host=str(address))) for address in addresses)
            ),
            host=original.netloc.decode("ascii"),
            server_name=host,
        )

    def _accepts(self, address: Address) -> bool:
        return _is_public(address) or (self._allow_loopback and address.is_loopback)
