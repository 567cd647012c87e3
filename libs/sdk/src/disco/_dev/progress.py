"""What ``disco dev up`` shows while it works: a spinner per step, then its time.

On a terminal each step shows a rich spinner while it runs; every step ends
with one line, ``✓ <step> (1.2s)`` or ``✗ <step> (failed after 1.2s)``, so a
log or CI output says what took how long too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from rich.console import Console

__all__ = ["Steps"]


class Steps:
    """Runs named steps with a spinner and reports each one's duration.

    Args:
        echo: where the finished lines go (the command's output).
        console: the terminal for the spinner; none, or not a terminal, means no spinner.
    """

    def __init__(self, echo: Callable[[str], None], console: Console | None = None) -> None:
        self.echo = echo
        self.console = console
        self.timings: list[tuple[str, float]] = []

    def _spinner(self, what: str) -> AbstractContextManager[object]:
        console = self.console
        if console is None or not console.is_terminal:
            return nullcontext()
        return console.status(f"{what}…", spinner="dots")

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        """Run the body as the step ``what``; report its duration (or its failure)."""
        started = time.perf_counter()
        try:
            with self._spinner(what):
                yield
        except BaseException:
            self.echo(f"✗ {what} (failed after {time.perf_counter() - started:.1f}s)")
            raise
        elapsed = time.perf_counter() - started
        self.timings.append((what, elapsed))
        self.echo(f"✓ {what} ({elapsed:.1f}s)")
