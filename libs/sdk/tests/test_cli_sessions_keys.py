"""``disco sessions watch``: which key sends which client message, and the lines it prints."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest
import websockets
from pydantic import SecretStr
from rich.console import Console

from disco._cli import sessions
from disco._cli.sessions import QUIT, PendingApprovals, event_line, key_message
from disco._dev.ports import free_port
from disco.auth import DEV_AUTH_SECRET
from disco.clients import ServiceClientSettings


def _message(kind: str, call: str, **payload: object) -> dict[str, object]:
    return {
        "id": f"e-{kind}-{call}",
        "type": kind,
        "session_id": "s1",
        "execution_id": "x1",
        "agent_id": "agent-1",
        "agent_name": "assistant",
        "timestamp": "2026-05-01T12:00:00+00:00",
        "payload": {"tool_call_id": call, "tool_name": "book_trip", **payload},
    }


def test_keys_decide_the_oldest_call_waiting_and_q_quits() -> None:
    pending = PendingApprovals()
    pending.see(_message("TOOL_APPROVAL_REQUESTED", "call_1"))
    pending.see(_message("TOOL_APPROVAL_REQUESTED", "call_2"))

    approve = key_message("a", pending)
    deny = key_message("d", pending)
    pending.see(_message("TOOL_APPROVED", "call_1"))
    next_one = key_message("y", pending)

    assert approve == {
        "type": "APPROVE_TOOL",
        "tool_call_id": "call_1",
        "reason": "approved in disco CLI",
    }
    assert deny == {"type": "DENY_TOOL", "tool_call_id": "call_1", "reason": "denied in disco CLI"}
    assert next_one is not None
    assert next_one["tool_call_id"] == "call_2"  # type: ignore[index]
    assert key_message("q", pending) == QUIT
    assert key_message("x", pending) is None


def test_no_call_waiting_means_a_decision_key_sends_nothing() -> None:
    pending = PendingApprovals()
    pending.see(_message("TOOL_APPROVAL_REQUESTED", "call_1"))
    pending.see(_message("TOOL_DENIED", "call_1"))
    pending.see(_message("TOOL_LOG", "call_9"))

    assert key_message("a", pending) is None
    assert key_message("n", pending) is None


def test_a_line_names_the_agent_the_type_and_the_call() -> None:
    line = event_line(_message("TOOL_APPROVAL_REQUESTED", "call_1", arguments={"city": "Paris"}))

    text = line.plain
    assert "assistant" in text
    assert "TOOL_APPROVAL_REQUESTED" in text
    assert "[call_1]" in text
    assert '{"city": "Paris"}' in text


async def test_an_unreachable_gateway_is_said_once_while_retrying_and_q_quits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attempts = 0
    retried = asyncio.Event()
    connect = websockets.connect

    def counting_connect(*args: Any, **kwargs: Any) -> Any:
        nonlocal attempts
        attempts += 1
        if attempts == 3:
            retried.set()
        return connect(*args, **kwargs)

    monkeypatch.setattr(sessions, "_RECONNECT_SECONDS", 0.01)
    monkeypatch.setattr(websockets, "connect", counting_connect)
    out = io.StringIO()
    settings = ServiceClientSettings(
        gateway_url=f"http://127.0.0.1:{free_port()}", auth_secret=SecretStr(DEV_AUTH_SECRET)
    )
    watch = sessions._Watch(Console(file=out, width=200), settings, "s1", (), False, None)
    keys: asyncio.Queue[str] = asyncio.Queue()

    running = asyncio.create_task(watch.run(keys))
    await asyncio.wait_for(retried.wait(), 10)
    keys.put_nowait("q")
    code = await asyncio.wait_for(running, 10)

    assert code == 0
    assert out.getvalue().count("cannot reach the gateway") == 1
    assert settings.gateway_url in out.getvalue()
