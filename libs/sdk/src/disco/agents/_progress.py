"""Partial answers to a request, shared by Tools and Workers: ``action.progressed``.

While it works, an agent may tell its caller how it is getting on: an
intermediate status message, an artifact, or an artifact in chunks. Each goes
out as an :data:`~disco_common.a2a.ACTION_PROGRESSED` envelope on the request's
response topic with its correlation id, so it shares the answer's key and a
reader sees it before the answer. The gateway turns them into A2A status and
artifact update events; other callers skip them by their type.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from disco.agents._common import derived_id
from disco_common.a2a import ACTION_PROGRESSED, A2AArtifact, A2APart, ActionProgressedData

if TYPE_CHECKING:
    from disco.bus import BusClient

__all__ = ["ProgressReporter"]


class ProgressReporter:
    """Sends the partial answers of one request (see the module docs).

    Args:
        bus: the agent's bus client.
        correlation_id: the request's correlation id (the answer's).
        response_topic: where the answer goes.
        task_id: the task the request is (the envelopes' ``task_id``).
        first_sequence: the sequence number of the first partial answer.
    """

    def __init__(
        self,
        bus: BusClient,
        *,
        correlation_id: str,
        response_topic: str,
        task_id: str | None = None,
        first_sequence: int = 1,
    ) -> None:
        self._bus = bus
        self._correlation_id = correlation_id
        self._response_topic = response_topic
        self._task_id = task_id
        self._sequence = itertools.count(first_sequence)

    async def update(self, *message: A2APart | str) -> None:
        """Tell the caller how the work goes: an intermediate status message (still working).

        Strings become text parts.
        """
        if not message:
            raise ValueError("update() needs at least one part: what to tell the caller")
        parts = [A2APart.from_text(p) if isinstance(p, str) else p for p in message]
        await self._send(lambda sequence: ActionProgressedData(sequence=sequence, message=parts))

    async def artifact(
        self, artifact: A2AArtifact, *, append: bool = False, last_chunk: bool = False
    ) -> None:
        """Hand the caller an artifact, or a chunk of one.

        Send the first chunk with ``append=False`` and the next ones with the same
        ``artifact_id`` and ``append=True``; mark the last with ``last_chunk=True``.
        """
        await self._send(
            lambda sequence: ActionProgressedData(
                sequence=sequence, artifact=artifact, append=append, last_chunk=last_chunk
            )
        )

    async def _send(self, build: Callable[[int], ActionProgressedData]) -> None:
        sequence = next(self._sequence)
        data = build(sequence)
        await self._bus.respond(
            ACTION_PROGRESSED,
            data.to_wire(),
            correlation_id=self._correlation_id,
            topic=self._response_topic,
            task_id=self._task_id,
            # The same request handled again sends the same envelopes: receivers deduplicate.
            id=derived_id(self._correlation_id, "progressed", str(sequence)),
        )
