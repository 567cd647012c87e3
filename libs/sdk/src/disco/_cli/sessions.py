"""``disco sessions watch SESSION_ID``: a session live from the gateway, approved by key press.

Connects to the gateway's ``/v1/sessions/{id}/stream`` websocket (URL and token
from the ``DISCO_*`` settings: ``DISCO_GATEWAY_URL``, and in dev a token minted
for ``DISCO_TENANT_ID``/``DISCO_USER_ID``; or ``--url``/``--tenant``/``--user``)
and prints each event as a line. While a tool call waits for approval, a key
decides the oldest one waiting: ``a``/``y`` approve, ``d``/``n`` deny; ``q``
quits. A dropped connection, or a ``STREAM_GAP`` (the watcher fell behind), is
resumed from the last event shown (``?after=``): nothing is missed, nothing shown
twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import termios
import tty
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Final
from urllib.parse import urlencode

import typer
import websockets
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from disco.clients import ServiceClientSettings

__all__ = ["QUIT", "PendingApprovals", "app", "event_line", "key_message"]

app = typer.Typer(
    name="sessions",
    help="Agent sessions as a UI sees them: watch one live, approve tool calls by key.",
    no_args_is_help=True,
)

APPROVE_KEYS: Final = frozenset("aAyY")
DENY_KEYS: Final = frozenset("dDnN")
QUIT_KEYS: Final = frozenset("qQ")
QUIT: Final = "quit"
"""What :func:`key_message` returns for a key that ends the watch."""

_CLOSE_UNAUTHENTICATED = 4401
_RECONNECT_SECONDS = 1.0
_STYLE = {
    "agent.status": "bold",
    "TOOL_APPROVAL_REQUESTED": "bold yellow",
    "TOOL_APPROVED": "green",
    "TOOL_DENIED": "red",
    "TOOL_EXECUTION_SUCCEEDED": "green",
    "TOOL_EXECUTION_FAILED": "bold red",
    "HUMAN_INPUT_REQUESTED": "bold yellow",
    "STREAM_GAP": "magenta",
    "ERROR": "bold red",
}


@dataclass
class PendingApprovals:
    """The tool calls of the session waiting for a decision, oldest first."""

    calls: dict[str, str] = field(default_factory=dict)
    """Tool call id → tool name."""

    def see(self, message: dict[str, Any]) -> None:
        """Follow a server message: a request adds its call, a decision or a run removes it."""
        payload = message.get("payload") or {}
        call = payload.get("tool_call_id")
        if not isinstance(call, str):
            return
        kind = message.get("type")
        if kind == "TOOL_APPROVAL_REQUESTED":
            self.calls[call] = str(payload.get("tool_name") or "?")
        elif isinstance(kind, str) and kind.startswith("TOOL_") and kind != "TOOL_LOG":
            self.calls.pop(call, None)

    def oldest(self) -> str | None:
        return next(iter(self.calls), None)


def key_message(key: str, pending: PendingApprovals) -> dict[str, Any] | str | None:
    """The client message a key press sends: ``APPROVE_TOOL``/``DENY_TOOL`` for the oldest
    call waiting, :data:`QUIT`, or None (no call waits, or the key means nothing)."""
    if key in QUIT_KEYS:
        return QUIT
    call = pending.oldest()
    if call is None:
        return None
    if key in APPROVE_KEYS:
        return {"type": "APPROVE_TOOL", "tool_call_id": call, "reason": "approved in disco CLI"}
    if key in DENY_KEYS:
        return {"type": "DENY_TOOL", "tool_call_id": call, "reason": "denied in disco CLI"}
    return None


def _summary(kind: str, payload: dict[str, Any]) -> str:
    if kind == "agent.status":
        detail = payload.get("error_message") or payload.get("last_response") or ""
        return f"{payload.get('status')} {detail}".strip()
    if kind == "agent.stream.chunk":
        return str(payload.get("chunk") or "")
    if kind.startswith("agent.step."):
        return f"step {payload.get('step_number')}"
    if kind.startswith("TOOL_") and kind != "TOOL_LOG":
        parts = [str(payload.get("tool_name") or ""), f"[{payload.get('tool_call_id')}]"]
        for key in ("arguments", "result", "error", "reason", "decided_by"):
            if payload.get(key) not in (None, "", {}):
                parts.append(f"{key}={json.dumps(payload[key], default=str)}")
        return " ".join(parts)
    if kind == "HUMAN_INPUT_REQUESTED":
        options = [o.get("value") for o in payload.get("options") or () if isinstance(o, dict)]
        return f"{payload.get('question')} {options if options else ''}".strip()
    if kind == "HUMAN_INPUT_ANSWERED":
        return f"{payload.get('answer')!r} by {payload.get('answered_by')}"
    if kind == "ACK":
        return f"sent: {payload.get('type')} (event {payload.get('event_id')})"
    if kind in ("ERROR", "STREAM_GAP"):
        return str(payload.get("message") or payload.get("reason") or payload)
    return json.dumps(payload, default=str)


def event_line(message: dict[str, Any]) -> Text:
    """One server message as a line: time, agent, type, what it says."""
    kind = str(message.get("type"))
    stamp = message.get("timestamp")
    when = ""
    if isinstance(stamp, str):
        with contextlib.suppress(ValueError):
            when = datetime.fromisoformat(stamp).astimezone().strftime("%H:%M:%S")
    line = Text(f"{when:<8} ")
    line.append(f"{message.get('agent_name') or '-':<16} ", style="cyan")
    line.append(f"{kind:<26} ", style=_STYLE.get(kind, ""))
    line.append(_summary(kind, message.get("payload") or {})[:2000])
    return line


class _Keys:
    """Key presses from stdin (cbreak mode on a terminal; any pipe works too)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self._fd: int | None = None
        self._saved: list[Any] | None = None

    @contextlib.contextmanager
    def reading(self) -> Iterator[_Keys]:
        loop = asyncio.get_running_loop()
        try:
            fd = sys.stdin.fileno()
        except (OSError, ValueError):
            yield self
            return
        if os.isatty(fd):
            self._saved = termios.tcgetattr(fd)
            tty.setcbreak(fd)
        try:
            loop.add_reader(fd, self._read, fd)
        except (OSError, ValueError, NotImplementedError):  # e.g. /dev/null: no keys
            fd = -1
        self._fd = fd
        try:
            yield self
        finally:
            if fd >= 0:
                loop.remove_reader(fd)
            if self._saved is not None:
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._saved)

    def _read(self, fd: int) -> None:
        data = os.read(fd, 1024)
        if not data:  # end of input: no more keys
            asyncio.get_running_loop().remove_reader(fd)
            return
        for key in data.decode(errors="ignore"):
            self.queue.put_nowait(key)


@dataclass
class _Watch:
    """One watch of a session (what was shown, what waits, where to resume)."""

    console: Console
    settings: ServiceClientSettings
    session_id: str
    agents: Sequence[str]
    as_json: bool
    limit: int | None
    last: str | None = None
    shown: int = 0
    pending: PendingApprovals = field(default_factory=PendingApprovals)
    unreachable: str | None = None
    """Why the gateway could not be reached, as last said (said again only when it changes)."""

    def url(self) -> str:
        base = self.settings.gateway_url.rstrip("/")
        base = "ws" + base[4:] if base.startswith("http") else base
        query: dict[str, Any] = {}
        if self.last is not None:
            query["after"] = self.last
        if self.agents:
            query["agent"] = list(self.agents)
        suffix = f"?{urlencode(query, doseq=True)}" if query else ""
        return f"{base}/v1/sessions/{self.session_id}/stream{suffix}"

    def print(self, message: dict[str, Any]) -> None:
        if self.as_json:
            self.console.file.write(json.dumps(message) + "\n")
        else:
            self.console.print(event_line(message), soft_wrap=True)
            if message.get("type") == "TOOL_APPROVAL_REQUESTED":
                self.console.print(
                    "  press [bold]a[/] to approve or [bold]d[/] to deny "
                    f"{escape(str(message['payload'].get('tool_call_id')))}"
                )
        self.console.file.flush()

    def _connected(self) -> None:
        self.unreachable = None
        if not self.as_json:
            where = f"after {self.last}" if self.last is not None else "from now on"
            self.console.print(
                f"[dim]watching session {escape(self.session_id)} {where} "
                "(a: approve, d: deny the oldest tool call waiting; q: quit)[/]"
            )
            self.console.file.flush()

    async def run(self, keys: asyncio.Queue[str]) -> int:
        """Watch until the limit, ``q`` or a refused token; the exit code."""
        provider = self.settings.token_provider()
        while True:
            headers = {"Authorization": f"Bearer {await provider.token()}"}
            try:
                async with websockets.connect(
                    self.url(), additional_headers=headers, max_size=None
                ) as connection:
                    done = await self._session(connection, keys)
                    if done is not None:
                        return done
            except websockets.ConnectionClosed as exc:
                if exc.rcvd is not None and exc.rcvd.code == _CLOSE_UNAUTHENTICATED:
                    self.console.print(f"[red]refused:[/] {escape(exc.rcvd.reason)}")
                    return 1
            except OSError as exc:
                if str(exc) != self.unreachable:
                    self.unreachable = str(exc)
                    self.console.print(
                        f"[red]cannot reach the gateway[/] at {escape(self.settings.gateway_url)}: "
                        f"{escape(str(exc))}; trying again every {_RECONNECT_SECONDS:g} s "
                        "(is the stack up? q quits)"
                    )
            if await self._quit_within(keys, _RECONNECT_SECONDS):
                return 0

    async def _quit_within(self, keys: asyncio.Queue[str], seconds: float) -> bool:
        """Whether ``q`` is pressed within ``seconds`` (while there is no connection: other
        keys have nothing to act on)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while (left := deadline - loop.time()) > 0:
            try:
                key = await asyncio.wait_for(keys.get(), left)
            except TimeoutError:
                return False
            if key_message(key, self.pending) == QUIT:
                return True
        return False

    async def _session(
        self, connection: websockets.ClientConnection, keys: asyncio.Queue[str]
    ) -> int | None:
        """One connection: None to resume on a new one, else the exit code."""
        # Its PONG says the gateway follows the session for this socket.
        await connection.send(json.dumps({"type": "PING"}))
        receiving = asyncio.create_task(connection.recv())
        pressing = asyncio.create_task(keys.get())
        try:
            while True:
                await asyncio.wait({receiving, pressing}, return_when=asyncio.FIRST_COMPLETED)
                if pressing.done():
                    reply = key_message(pressing.result(), self.pending)
                    if reply == QUIT:
                        return 0
                    if isinstance(reply, dict):
                        await connection.send(json.dumps(reply))
                    pressing = asyncio.create_task(keys.get())
                if receiving.done():
                    message = json.loads(receiving.result())
                    receiving = asyncio.create_task(connection.recv())
                    if message.get("type") == "PONG":
                        self._connected()
                        continue
                    self.print(message)
                    if message.get("type") == "STREAM_GAP":
                        return None  # resume after the last event shown: replayed, no gap
                    self.pending.see(message)
                    if message.get("id") is not None:
                        self.last = message["id"]
                        self.shown += 1
                        if self.limit is not None and self.shown >= self.limit:
                            return 0
        finally:
            for task in (receiving, pressing):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, websockets.ConnectionClosed):
                    await task


@app.command("watch")
def watch(
    session_id: Annotated[str, typer.Argument(help="The session to watch.")],
    after: Annotated[
        str | None,
        typer.Option("--after", help="Start after this event id (default: from now on)."),
    ] = None,
    agent: Annotated[
        list[str] | None,
        typer.Option("--agent", help="Only this agent's events (by name or id; repeatable)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", help="Stop after this many events.", min=1)
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print each message as JSON.")] = False,
    url: Annotated[
        str | None,
        typer.Option(
            "--url", help="The gateway's URL (default: DISCO_GATEWAY_URL).", show_default=False
        ),
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant",
            "-t",
            help="Dev: as this tenant (default: DISCO_TENANT_ID).",
            show_default=False,
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            "--user", "-u", help="Dev: as this user (default: DISCO_USER_ID).", show_default=False
        ),
    ] = None,
) -> None:
    """Print a session live; approve (a) or deny (d) the oldest tool call waiting; q quits."""
    overrides: dict[str, Any] = {}
    for name, value in (("gateway_url", url), ("tenant_id", tenant), ("user_id", user)):
        if value is not None:
            overrides[name] = value
    settings = ServiceClientSettings(**overrides)
    state = _Watch(Console(), settings, session_id, agent or (), as_json, limit, last=after)

    async def main() -> int:
        with _Keys().reading() as keys:
            return await state.run(keys.queue)

    try:
        code = asyncio.run(main())
    except KeyboardInterrupt:
        code = 0
    raise typer.Exit(code)
