"""The platform parts an agent runs on, built in order at start and stopped at stop.

At :meth:`~disco.agents.Agent.start`: the metrics endpoint (if a port is set),
the bus client, the service clients the agent was not given (through the
agent's ``_build_*`` hooks, so the agent owns and stops them), the request
validator, the :class:`~disco.agents.PlatformContext`, the layer's
``_on_starting`` hook, the registrar, and last the consumer with the agent's
routes and its dedup store. Stopping undoes them the other way round.

These functions run the agent's own steps on its attributes: they are the
:class:`~disco.agents.Agent`'s start and stop, kept apart from what an agent
declares.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import structlog

from disco._steps import StepJournalStore, StepLog
from disco.agents._errors import AgentError
from disco.agents._partition_watch import PartitionWatch
from disco.agents._platform import PlatformContext
from disco.agents._ports import AgentMemory, RequestValidator
from disco.bus import (
    BusClient,
    BusConsumer,
    CredentialSigner,
    DedupMarks,
    DedupStore,
    DurableDedupStore,
    serve_metrics,
    stop_metrics,
)
from disco.bus._metrics import default_bus_metrics
from disco.settings import BusSettings

if TYPE_CHECKING:
    from disco.agents._agent import Agent

__all__ = ["durable_dedup_store", "start_parts", "step_log", "stop_parts"]

_log = structlog.get_logger("disco.agents")


async def start_parts(agent: Agent) -> None:
    """Build and start what ``agent`` runs on, ending with its consumer.

    A part that fails leaves the ones before it started: the caller stops them
    (:func:`stop_parts`).
    """
    bus_settings = agent._bus_settings if agent._bus_settings is not None else BusSettings()
    metrics = None
    if bus_settings.metrics_port is not None:
        metrics = default_bus_metrics()
        serve_metrics(bus_settings.metrics_port, bus_settings.metrics_host)
        agent._metrics_served = (bus_settings.metrics_port, bus_settings.metrics_host)
    # The agent's identity vouches for the tenant of what it publishes.
    signer = (
        CredentialSigner.from_settings(bus_settings, agent._client_settings)
        if agent._client_settings is not None
        else None
    )
    bus = BusClient(bus_settings, name=agent.name, metrics=metrics, credentials=signer)
    agent._bus = bus
    await bus.start()
    memory, registry, tracker = agent._memory, agent._registry, agent._tracker
    needs_registry = agent._register or agent._validate_requests
    if memory is None or tracker is None or (registry is None and needs_registry):
        from disco.clients import ServiceClientSettings

        settings = (
            agent._client_settings
            if agent._client_settings is not None
            else ServiceClientSettings()
        )
        if memory is None:
            memory = agent._build_memory_client(settings)
        if registry is None and needs_registry:
            registry = agent._build_registry_client(settings)
        if tracker is None:
            # No connection is made until it is used: cheap for agents that never do.
            tracker = agent._build_tracker_client(settings)
    for client in agent._owned:
        await client.start()
    validator: RequestValidator | None = None
    if registry is not None and agent._validate_requests:
        validator = agent._build_validator(registry)
        bus.set_request_validator(validator.validate)
    agent._context = PlatformContext(
        bus=bus,
        memory=memory,
        registry=registry,
        agent=agent.identity,
        validator=validator,
        tracker=tracker,
    )
    await agent._on_starting(agent._context)
    if registry is not None and agent._register:
        agent._registrar = agent._build_registrar(registry, agent.registration())
        await agent._registrar.start()
    dedup = agent._dedup_store(memory, bus_settings)
    consumer = BusConsumer(
        bus, agent.name, dedup_store=dedup, steps=step_log(agent.name, memory, bus_settings, dedup)
    )
    for route in agent._routes.values():
        consumer.add_handler(route.topic, route.event_type, route.dispatch)
    agent._consumer = consumer
    await consumer.start()
    agent._watch = PartitionWatch(
        agent.name,
        agent.identity.agent_id,
        consumer,
        bound=bus_settings.bus_no_partitions_warning_seconds,
        registrar=agent._registrar,
    )
    agent._watch.start()
    _log.info(
        "agent started",
        agent=agent.name,
        agent_id=agent.identity.agent_id,
        kind=agent.kind,
        routes=[f"{t}:{e}" for t, e in agent._routes],
    )


async def stop_parts(agent: Agent, grace: float) -> None:
    """Stop whatever of ``agent``'s parts were started, the consumer first (idempotent)."""
    watch, agent._watch = agent._watch, None
    if watch is not None:
        await watch.stop()
    consumer, agent._consumer = agent._consumer, None
    if consumer is not None:
        await consumer.stop(grace)
    registrar, agent._registrar = agent._registrar, None
    if registrar is not None:
        try:
            await registrar.stop()
        except Exception as exc:  # deregistration is best effort; the TTL expires it
            _log.warning("deregistration failed", agent=agent.name, error=repr(exc))
    owned, agent._owned = agent._owned, []
    for client in owned:
        with contextlib.suppress(Exception):
            await client.stop()
    bus, agent._bus = agent._bus, None
    if bus is not None:
        await bus.stop()
    served, agent._metrics_served = agent._metrics_served, None
    if served is not None:
        stop_metrics(*served)
    if agent._context is not None:
        _log.info("agent stopped", agent=agent.name, agent_id=agent.identity.agent_id)
    agent._context = None


def durable_dedup_store(
    agent: Agent, memory: AgentMemory | None, settings: BusSettings
) -> DedupStore | None:
    """``agent``'s durable dedup store when it is on (None: the consumer's in-process one).

    Raises:
        AgentError: ``durable_dedup=True`` with a memory that keeps no marks.
    """
    wanted = agent._durable_dedup
    if wanted is False or (wanted is None and not agent.durable_dedup_default):
        return None
    marks: object = memory  # AgentMemory says nothing about marks; a MemoryClient keeps them
    if not isinstance(marks, DedupMarks):
        if wanted:
            raise AgentError(
                f"agent {agent.name!r}: durable_dedup=True needs a memory that keeps dedup "
                f"marks (a MemoryClient), not {type(memory).__name__}"
            )
        return None  # a stand-in memory (disco.testing): in-process dedup
    return DurableDedupStore(
        marks,
        agent.name,
        ttl_seconds=settings.bus_dedup_ttl_seconds,
        window=settings.bus_dedup_window_size,
    )


def step_log(
    group: str, memory: AgentMemory | None, settings: BusSettings, dedup: DedupStore | None
) -> StepLog | None:
    """The journal of ``group``'s steps (``disco.step``) in ``memory``, or None when the
    memory keeps none. Records live as long as dedup marks (``bus_dedup_ttl_seconds``);
    the durable dedup store's batch answers say which envelopes have a journal to read."""
    store: object = memory
    if not isinstance(store, StepJournalStore):
        return None
    return StepLog(
        store,
        group,
        ttl_seconds=settings.bus_dedup_ttl_seconds or None,
        window=max(1, min(settings.bus_dedup_window_size, 10_000)),
        hint=dedup.journal_hint if isinstance(dedup, DurableDedupStore) else None,
    )
