"""Small helpers about local TCP ports."""

from __future__ import annotations

import socket
import time
from collections import deque

from disco._dev.errors import DevStackError

__all__ = ["PortInUseError", "ensure_port_free", "free_port", "port_accepts", "wait_for_port"]

LOOPBACK = "127.0.0.1"


class PortInUseError(DevStackError):
    """A port the stack wants is taken by another process."""


# Ports this process handed out lately: the kernel may offer a port again as soon as
# its probe socket is closed, and callers often ask for several before binding any.
_HANDED_OUT: deque[int] = deque(maxlen=1024)


def free_port(host: str = LOOPBACK) -> int:
    """A port on ``host`` that nothing listens on right now, and not one this process
    handed out lately (several asked for at once are distinct)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.append(port)
            return port
    raise RuntimeError(f"no free port on {host} that was not handed out lately")


def port_accepts(port: int, host: str = LOOPBACK, timeout: float = 0.2) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def ensure_port_free(port: int, what: str, env_var: str, host: str = LOOPBACK) -> None:
    """Raise :class:`PortInUseError` naming ``what`` and how to move it if taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise PortInUseError(
                f"{what} cannot start: port {host}:{port} is already in use ({exc.strerror}). "
                f"Stop whatever holds it (`disco dev down` if it is an earlier stack), "
                f"or pick another port with {env_var}=<port>."
            ) from exc


def wait_for_port(port: int, host: str = LOOPBACK, timeout: float = 30.0) -> bool:
    """Wait until ``host:port`` accepts connections; False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_accepts(port, host):
            return True
        time.sleep(0.05)
    return False
