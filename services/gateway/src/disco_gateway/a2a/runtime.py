"""What the A2A side of one gateway instance works with (made in the lifespan)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from disco.bus import BusClient
from disco_gateway.agents.service import AgentDirectory
from disco_gateway.bus.fanout import BusFanout
from disco_gateway.cards.signing import CardSigner
from disco_gateway.push.sender import RetryingPushSender
from disco_gateway.push.store import PostgresPushConfigStore
from disco_gateway.settings import GatewaySettings
from disco_gateway.tasks.repository import ScopedWrites, TurnRepository, TurnRow
from disco_gateway.tasks.store import PostgresTaskStore
from disco_gateway.tasks.stream import PostgresTaskEventStream
from disco_service import Database

__all__ = ["A2ARuntime"]

_SETTLED = 50_000


@dataclass
class A2ARuntime:
    """The collaborators of the request handler, the executor and the applier."""

    settings: GatewaySettings
    database: Database
    bus: BusClient
    fanout: BusFanout
    directory: AgentDirectory
    store: PostgresTaskStore
    stream: PostgresTaskEventStream
    push_store: PostgresPushConfigStore
    push_sender: RetryingPushSender
    card_signer: CardSigner
    _settled: OrderedDict[tuple[str, str], None] = field(default_factory=OrderedDict)

    def settle(self, tenant_id: str, correlation_id: str) -> None:
        """Note that this instance applied the answer to ``correlation_id`` live."""
        key = (tenant_id, correlation_id)
        self._settled[key] = None
        self._settled.move_to_end(key)
        while len(self._settled) > _SETTLED:
            self._settled.popitem(last=False)

    def settled(self, tenant_id: str, correlation_id: str) -> bool:
        """Whether this instance applied the answer to ``correlation_id`` live (recently)."""
        return (tenant_id, correlation_id) in self._settled

    @property
    def source(self) -> str:
        """The CloudEvents ``source`` of what the gateway publishes for A2A callers."""
        return "disco://service/gateway/a2a"

    async def latest_turn(self, tenant_id: str, task_id: str) -> TurnRow | None:
        """The task's current turn."""
        async with self.database.unit_of_work(tenant_id) as session:
            return await TurnRepository(session, tenant_id).latest(task_id)

    async def turn_and_status(
        self, tenant_id: str, correlation_id: str
    ) -> tuple[TurnRow, str | None] | None:
        """The turn whose request carried ``correlation_id``, with its task's stored status."""
        async with self.database.unit_of_work(tenant_id) as session:
            return await TurnRepository(session, tenant_id).by_correlation_with_status(
                correlation_id
            )

    async def turn(self, tenant_id: str, task_id: str, number: int) -> TurnRow | None:
        """Turn ``number`` of the task."""
        async with self.database.unit_of_work(tenant_id) as session:
            return await TurnRepository(session, tenant_id).get(task_id, number)

    async def add_turn(self, tenant_id: str, turn: TurnRow) -> bool:
        """Record a turn before its request goes out (any instance can then follow it);
        False when it is recorded already: the turn is another message's, or this one's
        sent before."""
        return await ScopedWrites(self.database).add_turn(tenant_id, turn)

    async def claim_answer(self, tenant_id: str, turn: TurnRow, message_id: str) -> bool:
        """Take the question ``turn`` waits on for the caller's message ``message_id``;
        False when it waits on none any more."""
        async with self.database.unit_of_work(tenant_id) as session:
            return await TurnRepository(session, tenant_id).claim_answer(
                turn.task_id, turn.turn, message_id
            )

    async def forget_turn(self, tenant_id: str, turn: TurnRow) -> None:
        """Drop a recorded turn whose request never went out (the message may come again)."""
        async with self.database.unit_of_work(tenant_id) as session:
            await TurnRepository(session, tenant_id).delete(turn.task_id, turn.turn)

    async def remember_reply(self, tenant_id: str, turn: TurnRow, reply: dict[str, object]) -> None:
        """Record the direct message the agent answered ``turn`` with (for the same message
        sent again: no task holds it)."""
        async with self.database.unit_of_work(tenant_id) as session:
            await TurnRepository(session, tenant_id).set_reply(turn.task_id, turn.turn, reply)

    async def remember_question(
        self, tenant_id: str, turn: TurnRow, question: dict[str, object] | None
    ) -> None:
        """Record (or forget, with None) the question to a human a turn waits on."""
        async with self.database.unit_of_work(tenant_id) as session:
            await TurnRepository(session, tenant_id).set_question(turn.task_id, turn.turn, question)
