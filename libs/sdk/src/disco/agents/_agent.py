"""Layer 1: :class:`Agent`, raw envelopes on explicit topics, and the agent lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import structlog
from typing_extensions import Unpack

from disco._lifecycle import StartStop
from disco.agents._agent_parts import durable_dedup_store, step_log
from disco.agents._agent_process import serve, start_when_reachable
from disco.agents._common import capability_for
from disco.agents._errors import AgentDefinitionError, AgentError
from disco.agents._handlers import HandlerSpec, describe, inspect_handler
from disco.agents._options import AgentOptions, check_options
from disco.agents._partition_watch import PartitionWatch
from disco.agents._platform import AgentIdentity, PlatformContext
from disco.agents._ports import AgentMemory, Registrar, RequestValidator
from disco.bus import (
    ANY_EVENT,
    BusClient,
    BusConsumer,
    CredentialSigner,
    DedupStore,
    serve_metrics,
    stop_metrics,
)
from disco.bus._metrics import default_bus_metrics
from disco.settings import BusSettings, ServiceClientSettings
from disco_common.envelope import Envelope
from disco_common.registry import (
    AgentCapability,
    AgentRegistration,
    EventDefinition,
    EventDirection,
    Visibility,
)
from disco_common.topics import DLQ_SUFFIX, Topic, topic_name

if TYPE_CHECKING:
    from disco.clients import (
        MemoryClient,
        RegistryClient,
        ServiceClient,
        TrackerClient,
    )

__all__ = ["Agent", "AgentIdentity", "PlatformContext"]

_log = structlog.get_logger("disco.agents")

HandlerT = TypeVar("HandlerT", bound=Callable[..., Awaitable[Any]])
Dispatch = Callable[[Envelope], Awaitable[None]]

_KNOWN_TOPICS = {topic.value for topic in Topic}


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
        **options: the options every agent layer takes (what it registers,
            how it reaches the bus and the services, the clients to use,
            durable dedup), each documented once in :class:`~disco.agents.AgentOptions`.

    Raises:
        AgentDefinitionError: a bad name, version or registration.
        TypeError: a keyword that is no agent option.
    """

    kind = "agent"
    durable_dedup_default = False
    """Whether ``durable_dedup`` is on when not given."""

    def __init__(self, name: str, **options: Unpack[AgentOptions]) -> None:
        check_options(type(self).__name__, options)
        version = options.get("version", "0.1.0")
        description = options.get("description", "")
        capabilities = options.get("capabilities", ())
        events = options.get("events", ())
        tags = options.get("tags", ())
        visibility = options.get("visibility", Visibility.TENANT)
        ttl_seconds = options.get("ttl_seconds")
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
        self._bus_settings = options.get("bus_settings")
        self._client_settings = options.get("client_settings")
        self._register = options.get("register", True)
        self._validate_requests = options.get("validate_requests", True)
        self._heartbeat_interval = options.get("heartbeat_interval_seconds")
        self._ttl_seconds = ttl_seconds
        self._memory = options.get("memory")
        self._registry = options.get("registry")
        self._tracker = options.get("tracker")
        self._durable_dedup = options.get("durable_dedup")
        self._routes: dict[tuple[str, str], _Route] = {}
        self._bus: BusClient | None = None
        self._consumer: BusConsumer | None = None
        self._registrar: Registrar | None = None
        self._watch: PartitionWatch | None = None
        self._owned: list[ServiceClient] = []
        self._context: PlatformContext | None = None
        self._lifecycle = asyncio.Lock()
        self._metrics_served: tuple[int, str] | None = None

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
            events.append(
                EventDefinition(
                    event_type=route.event_type,
                    topic=route.topic,
                    direction=EventDirection.CONSUMED,
                )
            )
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
        """Build and start what the agent runs on, in order: the metrics endpoint (if
        a port is set), the bus client, the service clients it was not given (through
        the ``_build_*`` hooks, so the agent owns and stops them), the request
        validator, the :class:`PlatformContext`, the layer's ``_on_starting`` hook,
        the registrar, and last the consumer with the agent's routes and its dedup
        store.

        A part that fails leaves the ones before it started: the caller stops them
        (:meth:`_stop_parts`).
        """
        bus_settings = self.bus_settings
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
        dedup = self._dedup_store(memory, bus_settings)
        consumer = BusConsumer(
            bus,
            self.name,
            dedup_store=dedup,
            steps=step_log(self.name, memory, bus_settings, dedup),
        )
        for route in self._routes.values():
            consumer.add_handler(route.topic, route.event_type, route.dispatch)
        self._consumer = consumer
        await consumer.start()
        self._watch = PartitionWatch(
            self.name,
            self.identity.agent_id,
            consumer,
            bound=bus_settings.bus_no_partitions_warning_seconds,
            registrar=self._registrar,
        )
        self._watch.start()
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
        return durable_dedup_store(
            self.name,
            memory,
            settings,
            wanted=self._durable_dedup,
            default=self.durable_dedup_default,
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
        """Stop whatever parts were started, the other way round: the consumer first
        (idempotent)."""
        watch, self._watch = self._watch, None
        if watch is not None:
            await watch.stop()
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
        await start_when_reachable(self)
        consumer = self._consumer
        assert consumer is not None
        try:
            await consumer.run()
        finally:
            await self.stop()

    @property
    def bus_settings(self) -> BusSettings:
        """The bus settings the agent runs with: those it was given, else read from the
        ``DISCO_*`` environment now."""
        return self._bus_settings if self._bus_settings is not None else BusSettings()

    def serve(self) -> None:
        """Run the agent in the foreground until SIGINT or SIGTERM (a process's entry point).

        A signal stops it within ``bus_shutdown_timeout_seconds`` (default 10 s)
        whatever the broker's state: running handlers get half of it, steps
        that wait for an unanswering broker are cut short, and a stop still
        running at the bound is abandoned and the process exits with status 1.
        Several agents in one process: :func:`disco.serve`.
        """
        serve(self)
