"""Which push notification URLs the gateway posts to.

The a2a-sdk's policy (``validate_push_notification_url``): http(s) only, and a
host that resolves to public addresses only (no private, shared, loopback,
link-local, multicast or reserved range: no posting into the gateway's own
network, no cloud metadata endpoint). ``DISCO_GATEWAY_PUSH_ALLOW_LOOPBACK``
lets loopback through for development and tests, and nothing else.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse
from collections.abc import Awaitable, Callable

from a2a.utils.push_url_validator import validate_push_notification_url

__all__ = ["push_url_policy"]


async def _resolves_to_loopback_only(url: str) -> bool:
    try:
        parsed = urllib.parse.urlparse(url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        return False
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return False
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            parsed.hostname, port, type=socket.SOCK_STREAM
        )
    except OSError:
        return False
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    return bool(addresses) and all(address.is_loopback for address in addresses)


def push_url_policy(*, allow_loopback: bool) -> Callable[[str], Awaitable[bool]]:
    """The check a push URL must pass (when it is set, and again before each delivery)."""

    async def accept(url: str) -> bool:
        if allow_loopback and await _resolves_to_loopback_only(url):
            return True
        return await validate_push_notification_url(url)

    return accept
