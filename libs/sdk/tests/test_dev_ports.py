"""Ports for a local stack: several asked for at once are distinct."""

from __future__ import annotations

import pytest


def test_ports_asked_for_together_are_distinct(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from disco._dev import ports

    offered = iter([40001, 40001, 40002, 40001, 40003])

    class Probe:
        def __enter__(self) -> Probe:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def bind(self, address: tuple[str, int]) -> None:
            self.port = next(offered)  # the kernel offering a port again

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", self.port)

    monkeypatch.setattr(ports, "_HANDED_OUT", ports.deque(maxlen=8))
    monkeypatch.setattr(socket, "socket", lambda *a, **k: Probe())

    assert [ports.free_port() for _ in range(3)] == [40001, 40002, 40003]
