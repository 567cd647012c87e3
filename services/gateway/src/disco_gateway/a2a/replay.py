"""The same message sent again: answered with what its first sending made, on any instance.

A client that did not get its answer (a timeout, a dropped connection) sends its
message again with the same ``messageId``. The gateway sends it on once
(:class:`~disco_gateway.a2a.prepare.Duplicate`); the second sending is answered
with the task the first one made, as the caller asked for it:

- ``SendMessage`` returns the task once it ends or waits for input (at once
  with ``returnImmediately``), or the direct message the agent answered with;
- ``SendStreamingMessage`` streams the task from where it stands (its snapshot,
  then its updates, as ``SubscribeToTask`` does), or the direct message.

While the first sending is still under way the task may not be stored yet (a
task is stored when the agent first answers): the second sends the turn's
request once more (the same envelope: the first sending may have failed, or its
sender died, before it went out; agents deduplicate) and waits for the task,
woken by the task's log (``NOTIFY``) or a poll that backs off to a second, for
at most :data:`PATIENCE_SECONDS` (the agent's answer, not a claim, is waited
for: whichever instance gets it, the consumer group applies it to the task).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from a2a.server.context import ServerCallContext
from a2a.types import a2a_pb2
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import ParseDict

from disco_common.a2a import A2A_TERMINAL_STATES, A2ATaskState
from disco_gateway.a2a.prepare import Duplicate
from disco_gateway.a2a.runtime import A2ARuntime
from disco_gateway.scope import CallScope
from disco_gateway.tasks.repository import TaskRow, TurnRow
from disco_gateway.tasks.store import task_of

__all__ = ["PATIENCE_SECONDS", "Released", "Replay", "settled"]

PATIENCE_SECONDS = 300.0
"""How long a message sent again waits for the task its first sending makes."""

_FIRST_POLL_SECONDS = 0.05
_LAST_POLL_SECONDS = 1.0
_SETTLED = {state.value for state in A2A_TERMINAL_STATES} | {
    A2ATaskState.INPUT_REQUIRED.value,
    A2ATaskState.AUTH_REQUIRED.value,
}


class Released(Exception):
    """The first sending never went out and gave its claim back: send this one on."""


def _shows(duplicate: Duplicate) -> Callable[[TaskRow], bool]:
    """Whether a stored task shows the message (its first sending was taken up)."""

    def shows(row: TaskRow) -> bool:
        history = row.task.get("history") or ()
        return any(
            isinstance(message, dict) and message.get("messageId") == duplicate.message_id
            for message in history
        )

    return shows


def settled(row: TaskRow) -> bool:
    """Whether a blocking caller's wait is over: the task ended or waits for input."""
    return row.status in _SETTLED


class Replay:
    """What the first sending of a message made, as its next sending is answered."""

    def __init__(self, runtime: A2ARuntime) -> None:
        self._runtime = runtime

    async def outcome(
        self,
        duplicate: Duplicate,
        context: ServerCallContext,
        *,
        until: Callable[[TaskRow], bool] | None = None,
        resend: Callable[[TurnRow], Awaitable[None]] | None = None,
    ) -> a2a_pb2.Task | a2a_pb2.Message:
        """The task that shows the message (once ``until`` holds for it too), or the direct
        message the agent answered it with.

        ``resend``: when nothing shows the message yet, its turn's request is sent once more
        with it (the same envelope: the first sending may never have gone out, its sender
        gone; agents deduplicate), rather than waited for.

        Raises:
            Released: the first sending never went out (send this one on).
            UnsupportedOperationError: nothing showed within :data:`PATIENCE_SECONDS`.
        """
        runtime = self._runtime
        scope = CallScope.of(context)
        shows = _shows(duplicate)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PATIENCE_SECONDS
        pause = _FIRST_POLL_SECONDS
        with runtime.stream.watch(scope.tenant_id, duplicate.task_id) as grown:
            while True:
                grown.clear()
                row = await runtime.store.row(duplicate.task_id, context)
                if row is not None and shows(row) and (until is None or until(row)):
                    return task_of(row.task)
                if row is None and duplicate.turn is not None:
                    turn = await runtime.turn(scope.tenant_id, duplicate.task_id, duplicate.turn)
                    if turn is None:
                        raise Released
                    if turn.reply is not None:
                        return ParseDict(turn.reply, a2a_pb2.Message(), ignore_unknown_fields=True)
                    if resend is not None:
                        await resend(turn)
                        resend = None
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise UnsupportedOperationError(
                        message=f"message {duplicate.message_id} was sent before, as task "
                        f"{duplicate.task_id}, which has shown nothing for "
                        f"{PATIENCE_SECONDS:.0f}s: follow it with GetTask"
                    )
                # The store's log wakes us (a task that is over when first stored does not
                # notify: the poll finds it).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(pause, remaining)):
                        await grown.wait()
                pause = min(pause * 2, _LAST_POLL_SECONDS)
