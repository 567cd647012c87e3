"""Layer 1: :class:`Agent`, raw envelopes on explicit topics, and the agent lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from disco._lifecycle import StartStop
from disco.agents._common import capability_for
from disco.agents._errors import AgentDefinitionError, AgentError
from disco.agents._handlers import HandlerSpec, describe, inspect_handler
from disco.agents._ports import AgentMemory, ContextMemory, Registrar, RequestValidator
from disco.bus import (
    ANY_EVENT,
    BusClient,
    BusConsumer,
    BusUnavailableError,
    CredentialSigner,
    DedupMarks,
    DedupStore,
    DurableDedupStore,
    serve_metrics,
    stop_metrics,
)
from disco.bus._metrics import default_bus_metrics
from disco.settings import BusSettings
from disco_common.envelope import Envelope
from disco_common.registry import (
    AgentCapability,
    AgentRegistration,
    EventDefinition,
    Visibility,
)
from disco_common.topics import DLQ_SUFFIX, Topic, topic_name

if TYPE_CHECKING:
    from disco.clients import (
        MemoryClient,
        RegistryClient,
        ServiceClient,
        ServiceClientSettings,
        TrackerClient,
    )

__all__ = ["Agent", "AgentIdentity", "PlatformContext"]

_log = structlog.get_logger("disco.agents")

_FIRST_RECONNECT_DELAY = 0.5

HandlerT = TypeVar("HandlerT", bound=Callable[..., Awaitable[Any]])
Dispatch = Callable[[Envelope], Awaitable[None]]

_KNOWN_TOPICS = {topic.value for topic in Topic}


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    """Who an agent instance is."""

    name: str
    """The agent's name (its consumer group; instances of one name share the load)."""
    agent_id: str
    """This instance's registration id."""
    instance_id: str
    """The process behind it (``host:pid``)."""
    version: str = "0.1.0"


@dataclass(slots=True)
class PlatformContext:
    """What every handler can reach besides its input.

    Attributes:
        bus: publishes events (``publish``, ``request``, ``respond``, ``announce``).
        memory: the memory the agent runs with (:class:`~disco.agents.AgentMemory`:
            task and plan contexts, the plans listing, working memory): the memory
            service's :class:`~disco.clients.MemoryClient`, or under
            :mod:`disco.testing` an in-memory stand-in. ``isinstance(context.memory,
            MemoryClient)`` reaches the rest of the memory service's API.
        registry: the registry service client (discovery, schemas), or ``None``
            when the agent runs without a registry.
        agent: who this agent instance is.
        tracker: the tracker service client (e.g. the questions to humans and where
            they stand), or ``None`` (under :mod:`disco.testing`). Agents report
            progress on ``system-events``, never through it.
    """

    bus: BusClient
    memory: AgentMemory
    registry: RegistryClient | None
    agent: AgentIdentity
    validator: RequestValidator | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    tracker: TrackerClient | None = None

    async def validate_request(self, event_type: str, data: Any) -> None:
        """Check an ``action-requests`` payload against its registered schema, if any.

        Raises:
            ValueError: (``PayloadValidationError``) listing every violation.
        """
        if self.validator is not None:
            await self.validator.validate(event_type, data)

    @property
    def context_memory(self) -> ContextMemory:
        """The memory client as the task/plan layers use it.

        Raises:
            AgentError: the agent has no memory client.
        """
        if self.memory is None:
            raise AgentError(
                f"agent {self.agent.name!r} has no memory client: Workers and Planners keep "
                "task and plan contexts in the memory service (set DISCO_MEMORY_URL, or pass "
                "memory=... to the agent; disco.testing has an in-memory one)"
            )
        return self.memory


@dataclass(slots=True)
class _Route:
    topic: str
    event_type: str
    dispatch: Dispatch
    origin: str
    internal: bool


class Agent(StartStop):
    """A disco agent: handlers for envelopes on explicit topics, and a lifecycle.

    The base layer: ``@agent.on_event(topic=..., event_type=...)`` receives raw
    envelopes. :class:`Tool`, :class:`Worker` and :class:`Planner` build on it.
    All instances of one ``name`` form one consumer group and share the load.

    On :meth:`start` the agent connects to the bus, registers with the registry
    (capabilities and events, then heartbeats; re-registers if the registry
    forgets it) and starts consuming; :meth:`stop` finishes running handlers,
    commits, leaves the group and deregisters. ``async with agent:`` does both;
    :meth:`run` runs until stopped and re-raises a fatal error; :meth:`serve` is
    the blocking entry point of an agent process (stops on SIGINT/SIGTERM).

    Args:
        name: the agent's name (letters, digits, ``._-``); also its consumer group.
        version: its semantic version, as registered.
        description: what it does, for people and LLMs (registered).
        capabilities: capabilities to register besides those the decorators derive.
        events: event definitions it owns outside capabilities (e.g. facts it announces).
        tags: search tags (registered).
        visibility: ``tenant`` (default) or ``public``.
        bus_settings: how to reach the bus (default: ``DISCO_*`` variables).
        client_settings: how to reach the services (default: ``DISCO_*`` variables).
        register: register with the registry on start (default true).
        validate_requests: check ``action-requests`` payloads against registered
            schemas before publishing (default true; needs the registry).
        heartbeat_interval_seconds: how often to heartbeat the registry (default:
            a third of the TTL).
        ttl_seconds: registry TTL of this agent (registry default if ``None``).
        memory: the memory to use instead of a :class:`~disco.clients.MemoryClient`
            built from the settings (any :class:`~disco.agents.AgentMemory`, e.g.
            :class:`disco.testing.InMemoryMemory`).
        registry: a registry client to use instead of one built from the settings.
        tracker: a tracker client to use instead of one built from the settings.
        durable_dedup: remember handled envelope ids in the memory service
            (:class:`~disco.bus.DurableDedupStore`), so an envelope redelivered
            after a crash or a rebalance is skipped by any instance; otherwise in
            this process only. Default: on for Workers and Planners (their state
            already lives there), off for Tools and plain agents. Needs a memory
            that keeps dedup marks (a :class:`~disco.clients.MemoryClient`).
    """

    kind = "agent"
    durable_dedup_default = False
    """Whether ``durable_dedup`` is on when not given."""

    def __init__(
        self,
        name: str,
        *,
        version: str = "0.1.0",
        description: str = "",
        capabilities: Sequence[AgentCapability] = (),
        events: Sequence[EventDefinition] = (),
        tags: Sequence[str] = (),
        visibility: Visibility = Visibility.TENANT,
        bus_settings: BusSettings | None = None,
        client_settings: ServiceClientSettings | None = None,
        register: bool = True,
        validate_requests: bool = True,
        heartbeat_interval_seconds: float | None = None,
        ttl_seconds: int | None = None,
        memory: AgentMemory | None = None,
        registry: RegistryClient | None = None,
        tracker: TrackerClient | None = None,
        durable_dedup: bool | None = None,
    ) -> None:
        instance_id = f"{socket.gethostname()}:{os.getpid()}"
        agent_id = f"{name}.{uuid.uuid4().hex[:12]}"
        # Validate the static part of the registration now: a bad name or version
        # fails here, not at start.
        try:
            AgentRegistration(
                agent_id=agent_id,
                name=name,
                version=version,
                description=description,
                tags=list(tags),
                visibility=visibility,
                capabilities=list(capabilities),
                events=list(events),
                ttl_seconds=ttl_seconds,
            )
        except ValueError as exc:
            raise AgentDefinitionError(f"agent {name!r} is not valid: {exc}") from None
        self.name = name
        self.version = version
        self.description = description
        self.tags = list(tags)
        self.visibility = visibility
        self.identity = AgentIdentity(
            name=name, agent_id=agent_id, instance_id=instance_id, version=version
        )
        self._capabilities = list(capabilities)
        self._derived: list[AgentCapability] = []
        self._events = list(events)
        self._bus_settings = bus_settings
        self._client_settings = client_settings
        self._register = register
        self._validate_requests = validate_requests
        self._heartbeat_interval = heartbeat_interval_seconds
        self._ttl_seconds = ttl_seconds
        self._memory = memory
        self._registry = registry
        self._tracker = tracker
        self._durable_dedup = durable_dedup
        self._routes: dict[tuple[str, str], _Route] = {}
        self._bus: BusClient | None = None
        self._consumer: BusConsumer | None = None
        self._registrar: Registrar | None = None
        self._owned: list[ServiceClient] = []
        self._context: PlatformContext | None = None
        self._lifecycle = asyncio.Lock()
        self._metrics_served: tuple[int, str] | None = None
        self._stopping_task: asyncio.Task[None] | None = None

    # -- declaring -------------------------------------------------------------

    def on_event(
        self, topic: str | Topic | None = None, event_type: str | None = None
    ) -> Callable[[HandlerT], HandlerT]:
        """Decorator: call the handler for ``event_type`` envelopes on ``topic``.

        Both are required: disco never infers a topic. ``event_type="*"`` takes
        every type on the topic. The handler is ``async def handler(event:
        Envelope, context: PlatformContext)`` (the context is optional); it is
        checked now and returned unchanged.

        Raises:
            AgentDefinitionError: a missing topic or event type, a bad signature,
                or a second handler for the same topic and event type.
        """
        if topic is None:
            hint = f' event_type="{event_type}"' if event_type else ""
            raise AgentDefinitionError(
                f"on_event needs an explicit topic: write @{self._var}.on_event("
                f'topic="business-facts",{hint or " event_type=..."}) — disco never infers a '
                f"topic from an event name; topics: {sorted(_KNOWN_TOPICS)}"
            )
        if event_type is None:
            raise AgentDefinitionError(
                f'on_event(topic="{topic}") needs an event_type: the event type to handle, or '
                '"*" for every type on the topic'
            )
        logical = str(topic)

        def register(handler: HandlerT) -> HandlerT:
            spec = inspect_handler(
                handler,
                decorator="on_event",
                first="event: Envelope",
                context_types=(Envelope,),
            )
            agent = self

            async def dispatch(envelope: Envelope) -> None:
                if spec.takes_context:
                    await handler(envelope, agent.context)
                else:
                    await handler(envelope)

            self._add_route(logical, event_type, dispatch, describe(handler), internal=False)
            return handler

        return register

    @property
    def _var(self) -> str:
        return self.kind

    def _add_route(
        self, topic: str, event_type: str, dispatch: Dispatch, origin: str, *, internal: bool
    ) -> None:
        if self._consumer is not None:
            raise AgentDefinitionError(
                f"agent {self.name!r} is running: declare handlers before start()"
            )
        try:
            topic_name(topic)
        except ValueError as exc:
            raise AgentDefinitionError(str(exc)) from None
        if topic.endswith(DLQ_SUFFIX):
            raise AgentDefinitionError(
                f"{topic!r} is a dead-letter topic: read it with a plain Kafka consumer"
            )
        if topic not in _KNOWN_TOPICS and "." not in event_type and event_type != ANY_EVENT:
            _log.warning("handler on a topic disco does not define", topic=topic)
        existing = self._routes.get((topic, event_type))
        if existing is not None:
            raise AgentDefinitionError(
                f"{existing.origin} already handles {event_type!r} on {topic!r} for agent "
                f"{self.name!r}; one handler per topic and event type (cannot add {origin})"
            )
        self._routes[(topic, event_type)] = _Route(topic, event_type, dispatch, origin, internal)

    def _attach(self, context: PlatformContext) -> None:
        """Run handlers with ``context`` without a broker (what :mod:`disco.testing` does)."""
        self._check_ready_to_start()
        self._context = context

    def _detach(self) -> None:
        self._context = None

    def _dispatcher(self, topic: str, event_type: str) -> Dispatch | None:
        route = self._routes.get((topic, event_type)) or self._routes.get((topic, ANY_EVENT))
        return route.dispatch if route is not None else None

    def _serve_requests(
        self,
        event_type: str,
        spec: HandlerSpec,
        dispatch: Dispatch,
        *,
        capability: str | None,
        description: str | None,
        response_event: str | None,
    ) -> None:
        """Route ``event_type`` requests on ``action-requests`` to ``dispatch``.

        The capability the handler offers (derived from ``spec``'s type hints) is
        registered with the agent.
        """
        derived = capability_for(
            spec,
            event_type,
            capability=capability,
            description=description,
            response_event=response_event,
        )
        self._add_route(
            Topic.ACTION_REQUESTS.value, event_type, dispatch, describe(spec.func), internal=True
        )
        self._derived.append(derived)

    @property
    def routes(self) -> list[tuple[str, str]]:
        """``(topic, event_type)`` pairs this agent handles."""
        return list(self._routes)

    def registration(self) -> AgentRegistration:
        """What this agent registers: its capabilities (given and derived) and events."""
        capabilities = list(self._capabilities)
        named = {c.task_name for c in capabilities}
        covered = {c.consumed_event.event_type for c in capabilities}
        for capability in self._derived:
            if capability.task_name in named or capability.consumed_event.event_type in covered:
                continue
            capabilities.append(capability)
            named.add(capability.task_name)
            covered.add(capability.consumed_event.event_type)
        events = list(self._events)
        listed = {(e.topic, e.event_type) for e in events}
        for route in self._routes.values():
            key = (route.topic, route.event_type)
            if route.internal or route.event_type == ANY_EVENT or key in listed:
                continue
            if route.event_type in covered:
                continue
            events.append(EventDefinition(event_type=route.event_type, topic=route.topic))
            listed.add(key)
        return AgentRegistration(
            agent_id=self.identity.agent_id,
            name=self.name,
            version=self.version,
            description=self.description,
            tags=self.tags,
            instance_id=self.identity.instance_id,
            visibility=self.visibility,
            capabilities=capabilities,
            events=events,
            ttl_seconds=self._ttl_seconds,
            metadata={"kind": self.kind, "sdk": "disco-python"},
        )

    # -- running ---------------------------------------------------------------

    @property
    def context(self) -> PlatformContext:
        """The platform context handlers receive.

        Raises:
            AgentError: the agent is not started.
        """
        if self._context is None:
            raise AgentError(
                f"agent {self.name!r} is not started: use `async with agent:` or "
                "`await agent.start()` (or disco.testing to call handlers without a broker)"
            )
        return self._context

    @property
    def running(self) -> bool:
        """Whether the agent consumes now."""
        return self._consumer is not None

    def _check_ready_to_start(self) -> None:
        if not self._routes:
            raise AgentDefinitionError(
                f"agent {self.name!r} has no handlers: decorate some with "
                f"@{self._var}.on_...(...) before start()"
            )

    async def start(self) -> None:
        """Connect, register and start consuming (idempotent).

        Raises:
            AgentDefinitionError: the agent has no handlers.
            BusUnavailableError: the broker could not be reached.
        """
        async with self._lifecycle:
            if self._consumer is not None:
                return
            self._check_ready_to_start()
            try:
                await self._start_parts()
            except BaseException:
                await self._stop_parts(grace=0.0)
                raise

    async def _start_parts(self) -> None:
        bus_settings = self._bus_settings if self._bus_settings is not None else BusSettings()
        metrics = None
        if bus_settings.metrics_port is not None:
            metrics = default_bus_metrics()
            serve_metrics(bus_settings.metrics_port, bus_settings.metrics_host)
            self._metrics_served = (bus_settings.metrics_port, bus_settings.metrics_host)
        # The agent's identity vouches for the tenant of what it publishes.
        signer = (
            CredentialSigner.from_settings(bus_settings, self._client_settings)
            if self._client_settings is not None
            else None
        )
        bus = BusClient(bus_settings, name=self.name, metrics=metrics, credentials=signer)
        self._bus = bus
        await bus.start()
        memory, registry, tracker = self._memory, self._registry, self._tracker
        needs_registry = self._register or self._validate_requests
        if memory is None or tracker is None or (registry is None and needs_registry):
            from disco.clients import ServiceClientSettings

            settings = (
                self._client_settings
                if self._client_settings is not None
                else ServiceClientSettings()
            )
            if memory is None:
                memory = self._build_memory_client(settings)
            if registry is None and needs_registry:
                registry = self._build_registry_client(settings)
            if tracker is None:
                # No connection is made until it is used: cheap for agents that never do.
                tracker = self._build_tracker_client(settings)
        for client in self._owned:
            await client.start()
        validator: RequestValidator | None = None
        if registry is not None and self._validate_requests:
            validator = self._build_validator(registry)
            bus.set_request_validator(validator.validate)
        self._context = PlatformContext(
            bus=bus,
            memory=memory,
            registry=registry,
            agent=self.identity,
            validator=validator,
            tracker=tracker,
        )
        await self._on_starting(self._context)
        if registry is not None and self._register:
            self._registrar = self._build_registrar(registry, self.registration())
            await self._registrar.start()
        consumer = BusConsumer(bus, self.name, dedup_store=self._dedup_store(memory, bus_settings))
        for route in self._routes.values():
            consumer.add_handler(route.topic, route.event_type, route.dispatch)
        self._consumer = consumer
        await consumer.start()
        _log.info(
            "agent started",
            agent=self.name,
            agent_id=self.identity.agent_id,
            kind=self.kind,
            routes=[f"{t}:{e}" for t, e in self._routes],
        )

    def _dedup_store(self, memory: AgentMemory | None, settings: BusSettings) -> DedupStore | None:
        """The durable dedup store when it is on (None: the consumer's in-process one).

        Raises:
            AgentError: ``durable_dedup=True`` with a memory that keeps no marks.
        """
        wanted = self._durable_dedup
        if wanted is False or (wanted is None and not self.durable_dedup_default):
            return None
        marks: object = memory  # AgentMemory says nothing about marks; a MemoryClient keeps them
        if not isinstance(marks, DedupMarks):
            if wanted:
                raise AgentError(
                    f"agent {self.name!r}: durable_dedup=True needs a memory that keeps dedup "
                    f"marks (a MemoryClient), not {type(memory).__name__}"
                )
            return None  # a stand-in memory (disco.testing): in-process dedup
        return DurableDedupStore(
            marks,
            self.name,
            ttl_seconds=settings.bus_dedup_ttl_seconds,
            window=settings.bus_dedup_window_size,
        )

    def _build_memory_client(self, settings: ServiceClientSettings) -> MemoryClient:
        from disco.clients import MemoryClient

        client = MemoryClient.from_settings(settings)
        self._owned.append(client)
        return client

    def _build_registry_client(self, settings: ServiceClientSettings) -> RegistryClient:
        from disco.clients import RegistryClient

        client = RegistryClient.from_settings(settings)
        self._owned.append(client)
        return client

    def _build_tracker_client(self, settings: ServiceClientSettings) -> TrackerClient:
        from disco.clients import TrackerClient

        client = TrackerClient.from_settings(settings)
        self._owned.append(client)
        return client

    def _build_validator(self, registry: RegistryClient) -> RequestValidator:
        from disco.registry import PayloadValidator

        validator: RequestValidator = PayloadValidator(registry)
        return validator

    def _build_registrar(
        self, registry: RegistryClient, registration: AgentRegistration
    ) -> Registrar:
        from disco.registry import AgentRegistrar

        registrar: Registrar = AgentRegistrar(
            registry, registration, heartbeat_interval_seconds=self._heartbeat_interval
        )
        return registrar

    async def _on_starting(self, context: PlatformContext) -> None:
        """Hook for layers: runs after the clients exist, before consuming."""

    async def wait_ready(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109
        """Wait until this instance was given partitions to consume (useful in tests).

        Raises:
            TimeoutError: no partitions within ``timeout`` seconds.
        """
        if self._consumer is None:
            raise AgentError(f"agent {self.name!r} is not started")
        await self._consumer.wait_assigned(timeout)

    async def stop(self, grace: float = 10.0) -> None:
        """Finish running handlers (up to ``grace`` seconds), commit, leave, deregister.

        Idempotent.
        """
        async with self._lifecycle:
            await self._stop_parts(grace)

    async def _stop_parts(self, grace: float) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop(grace)
        registrar, self._registrar = self._registrar, None
        if registrar is not None:
            try:
                await registrar.stop()
            except Exception as exc:  # deregistration is best effort; the TTL expires it
                _log.warning("deregistration failed", agent=self.name, error=repr(exc))
        owned, self._owned = self._owned, []
        for client in owned:
            with contextlib.suppress(Exception):
                await client.stop()
        bus, self._bus = self._bus, None
        if bus is not None:
            await bus.stop()
        served, self._metrics_served = self._metrics_served, None
        if served is not None:
            stop_metrics(*served)
        if self._context is not None:
            _log.info("agent stopped", agent=self.name, agent_id=self.identity.agent_id)
        self._context = None

    async def run(self) -> None:
        """Start and consume until :meth:`stop`; then stop cleanly.

        A broker that cannot be reached at start is waited for: the start is
        tried again with a backoff doubling from 0.5 s up to
        ``bus_reconnect_backoff_max_seconds`` until it succeeds or the task is
        cancelled. (Once started, aiokafka reconnects by itself and the
        consumer re-joins its group.)

        Raises:
            BaseException: the fatal error that stopped the agent's consumer.
        """
        await self._start_when_reachable()
        consumer = self._consumer
        assert consumer is not None
        try:
            await consumer.run()
        finally:
            await self.stop()

    async def _start_when_reachable(self) -> None:
        settings = self._settings_of_bus()
        delay = _FIRST_RECONNECT_DELAY
        while True:
            try:
                await self.start()
                return
            except BusUnavailableError as exc:
                _log.warning(
                    "broker unreachable; trying again",
                    agent=self.name,
                    retry_in_seconds=delay,
                    error=str(exc),
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, settings.bus_reconnect_backoff_max_seconds)

    def _settings_of_bus(self) -> BusSettings:
        return self._bus_settings if self._bus_settings is not None else BusSettings()

    def serve(self) -> None:
        """Run the agent in the foreground until SIGINT or SIGTERM (a process's entry point).

        A signal stops it within ``bus_shutdown_timeout_seconds`` (default 10 s)
        whatever the broker's state: running handlers get half of it, steps
        that wait for an unanswering broker are cut short, and a stop still
        running at the bound is abandoned and the process exits with status 1.
        """
        bound = self._settings_of_bus().bus_shutdown_timeout_seconds

        async def main() -> None:
            loop = asyncio.get_running_loop()
            stopping = asyncio.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError):
                    loop.add_signal_handler(sig, stopping.set)
            runner = asyncio.create_task(self.run())
            waiter = asyncio.create_task(stopping.wait())
            done, _ = await asyncio.wait({runner, waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if runner in done:
                await runner
            elif not await self._stop_within(runner, bound):
                # Tasks stuck on a broker that does not answer must not hold the
                # process (asyncio.run would wait for them on the way out).
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(1)

        asyncio.run(main())

    async def _stop_within(self, runner: asyncio.Task[None], bound: float) -> bool:
        """Stop ``runner`` (this agent's :meth:`run`) within ``bound`` seconds; whether it did."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + bound
        if self._consumer is None:
            runner.cancel()  # still starting (maybe waiting for the broker)
        else:
            self._stopping_task = loop.create_task(
                self.stop(grace=bound / 2), name=f"disco-stop-{self.name}"
            )
        done, _ = await asyncio.wait({runner}, timeout=max(0.0, deadline - loop.time()))
        if runner in done:
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            return True
        _log.error(
            "stop did not finish within the bound; exiting anyway",
            agent=self.name,
            bound_seconds=bound,
        )
        return False
