"""Ctrl-C and SIGTERM while the local stack starts, runs and stops.

A Ctrl-C at a terminal goes to every process of the foreground group, and
``make dev`` runs ``uv run disco dev up``: the stack can get the interrupt two or
three times within a fraction of a second (uv forwards it too). The first one
starts the stop; the ones after it must not break off that stop half way, or the
services, the broker and Postgres are left holding their ports. So while a stack
is in this process's hands, :class:`StopSignals` keeps SIGINT and SIGTERM: the
first one stops the stack (at once while it starts: ``KeyboardInterrupt``; while
it runs: a flag its loop reads), every later one is answered with a note and
otherwise ignored until the stop is complete.

A child process being started is the one place an interrupt must wait: raised
inside ``subprocess.Popen`` after the fork, it loses the child's handle, and the
service (or broker, or Postgres) that starts anyway is never stopped. So each
launch runs inside :func:`launching`, and an interrupt that lands there is
raised once the child is in hand (its handle kept where the stop finds it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

__all__ = ["StopSignals", "launching"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_STOPPING = b"\nstopping the stack\n"
_NOTE = b"still stopping the stack: every process is being stopped, one moment\n"


class _Launches:
    """How many launches are under way, and whether an interrupt waits for their end."""

    depth = 0
    interrupt_waiting = False


@contextlib.contextmanager
def launching() -> Iterator[None]:
    """Start a child process and keep its handle; an interrupt meanwhile waits for the end.

    Wrap the ``Popen`` call together with the statement that stores its handle.
    Nested launches raise the waiting interrupt once, at the outermost end.
    """
    _Launches.depth += 1
    try:
        yield
    except BaseException:
        _Launches.interrupt_waiting = False  # what broke the launch off is raised instead
        raise
    finally:
        _Launches.depth -= 1
    if _Launches.depth == 0 and _Launches.interrupt_waiting:
        _Launches.interrupt_waiting = False
        raise KeyboardInterrupt


class StopSignals:
    """Holds SIGINT and SIGTERM for the life of a stack (see the module's docstring).

    ``requested`` is set by the first signal, or by :meth:`stopping`;
    ``by_signal`` says which (and that the signal's handler said "stopping the
    stack" already, at once). Installing is re-entrant; outside the main thread
    (where Python cannot set handlers) nothing is installed.
    """

    def __init__(self) -> None:
        self.requested = False
        self.by_signal = False
        self._raise = False
        self._noted = False
        self._depth = 0
        self._previous: dict[int, Any] = {}

    @contextlib.contextmanager
    def caught(self) -> Iterator[StopSignals]:
        """Keep the signals while the body runs; restore the previous handlers after it."""
        install = self._depth == 0 and threading.current_thread() is threading.main_thread()
        if install:
            self._previous = {sig: signal.signal(sig, self._handle) for sig in _SIGNALS}
        self._depth += 1
        try:
            yield self
        finally:
            self._depth -= 1
            if install:
                for sig, handler in self._previous.items():
                    signal.signal(sig, handler)
                self._previous = {}

    @contextlib.contextmanager
    def interrupting(self) -> Iterator[None]:
        """While the body runs, the first signal raises ``KeyboardInterrupt`` in it.

        For the start, whose steps block in calls that a flag cannot break off.
        """
        with self.caught():
            self._raise = True
            try:
                if self.requested:
                    raise KeyboardInterrupt
                yield
            finally:
                self._raise = False

    def stopping(self) -> None:
        """The stop has begun: from now on every signal is only noted."""
        self.requested = True
        self._raise = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.requested:
            self.requested = self.by_signal = True
            if self._raise:
                self._raise = False
                if _Launches.depth:
                    _Launches.interrupt_waiting = True  # raised by launching() at its end
                    _write(_STOPPING)
                    return
                raise KeyboardInterrupt
            _write(_STOPPING)
            return
        if not self._noted:
            self._noted = True
            _write(_NOTE)


def _write(note: bytes) -> None:
    # A plain write: a handler may run in the middle of a print to the same stream.
    with contextlib.suppress(OSError):
        os.write(2, note)
