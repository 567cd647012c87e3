"""``disco sessions watch`` against a real gateway: a session printed live, approved by a key."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

import httpx

from tests.e2e.gateway.conftest import ROOT, TENANT, USER, GatewayProcess, bearer


class _Watcher:
    """``disco sessions watch`` as a process: its lines as they come, keys to its stdin."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []

    async def line_with(self, *words: str, timeout: float = 60.0) -> str:
        """The first line (seen or to come) holding every one of ``words``."""
        for line in self.lines:
            if all(word in line for word in words):
                return line
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                raw = await self.process.stdout.readline()
                if not raw:
                    raise AssertionError(f"the watcher ended; it printed {self.lines}")
                line = raw.decode().rstrip()
                self.lines.append(line)
                if all(word in line for word in words):
                    return line

    async def press(self, key: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(key.encode())
        await self.process.stdin.drain()


async def _watch(gateway: GatewayProcess, *args: str, **env: str) -> _Watcher:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "disco._cli.main",
        "sessions",
        "watch",
        *args,
        env={
            **os.environ,
            "DISCO_GATEWAY_URL": gateway.url,
            "DISCO_TENANT_ID": TENANT,
            "DISCO_USER_ID": USER,
            "COLUMNS": "250",
            "NO_COLOR": "1",
            **env,
        },
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    return _Watcher(process)


async def test_sessions_watch_prints_the_session_and_approves_with_a_key(
    gateway: GatewayProcess,
) -> None:
    session = f"s-{uuid.uuid4().hex[:12]}"
    watcher = await _watch(gateway, session)
    try:
        await watcher.line_with("watching session", session)
        async with httpx.AsyncClient(headers=bearer(), timeout=30) as http:
            sent = await http.post(
                f"{gateway.url}/v1/sessions/{session}/messages",
                json={"agent": "gw-assistant", "text": "book Paris on 2026-05-01"},
            )
        assert sent.status_code == 202, sent.text
        asked = await watcher.line_with("TOOL_APPROVAL_REQUESTED", "book_trip")
        await watcher.line_with("press a to approve")
        await watcher.press("a")
        acked = await watcher.line_with("ACK", "sent: TOOL_APPROVED")
        approved = await watcher.line_with("TOOL_APPROVED", "decided_by")
        succeeded = await watcher.line_with("TOOL_EXECUTION_SUCCEEDED")
        await watcher.line_with("agent.status", "completed")
        await watcher.press("q")
        async with asyncio.timeout(30):
            code = await watcher.process.wait()
    finally:
        if watcher.process.returncode is None:
            watcher.process.kill()
            await watcher.process.wait()

    assert code == 0
    assert "gw-assistant" in asked
    assert "event" in acked
    assert f'decided_by="{USER}"' in approved
    assert "TRIP-PAR-2026-05-01" in succeeded


async def test_sessions_watch_with_a_bad_token_says_so_and_fails(gateway: GatewayProcess) -> None:
    watcher = await _watch(gateway, "s-any", DISCO_AUTH_TOKEN="not-a-jwt")
    async with asyncio.timeout(60):
        out, err = await watcher.process.communicate()

    assert watcher.process.returncode == 1, err
    assert "refused" in out.decode()
