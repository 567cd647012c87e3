"""The options every agent layer takes, defined (and documented) once.

:class:`Agent`, :class:`Tool`, :class:`Worker` and :class:`Planner` take them as
``**options: Unpack[AgentOptions]``: callers pass plain keywords, and mypy
checks each keyword's name and type against this one definition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from disco.agents._ports import AgentMemory
from disco.settings import BusSettings
from disco_common.registry import AgentCapability, EventDefinition, Visibility

if TYPE_CHECKING:
    from disco.clients import RegistryClient, ServiceClientSettings, TrackerClient

__all__ = ["AgentOptions", "check_options"]


class AgentOptions(TypedDict, total=False):
    """The keyword options of every agent (``Agent``, ``Tool``, ``Worker``, ``Planner``).

    All are optional; a wrapper of an agent class can take them the same way::

        def make_worker(name: str, **options: Unpack[AgentOptions]) -> Worker:
            return Worker(name, **options)

    Attributes:
        version: the agent's semantic version, as registered (default ``"0.1.0"``).
        description: what it does, for people and LLMs (registered; default empty).
        capabilities: capabilities to register besides those the decorators derive.
        events: event definitions it owns outside capabilities (e.g. facts it
            announces), each with its ``direction``.
        tags: search tags (registered).
        visibility: ``Visibility.TENANT`` (default) or ``Visibility.PUBLIC``.
        bus_settings: how to reach the bus (default: the ``DISCO_*`` variables).
        client_settings: how to reach the services (default: the ``DISCO_*`` variables).
        register: register with the registry on start (default true).
        validate_requests: check ``action-requests`` payloads against registered
            schemas before publishing (default true; needs the registry).
        heartbeat_interval_seconds: how often to heartbeat the registry (default:
            a third of the TTL).
        ttl_seconds: registry TTL of this agent (the registry's default if ``None``).
        memory: the memory to use instead of a :class:`~disco.clients.MemoryClient`
            built from the settings (any :class:`~disco.agents.AgentMemory`, e.g.
            :class:`disco.testing.InMemoryMemory`).
        registry: a registry client to use instead of one built from the settings.
        tracker: a tracker client to use instead of one built from the settings.
        durable_dedup: remember handled envelope ids in the memory service
            (:class:`~disco.bus.DurableDedupStore`), so an envelope redelivered
            after a crash or a rebalance is skipped by any instance; otherwise in
            this process only. Default (``None``): on for Workers and Planners
            (their state already lives there), off for Tools and plain agents.
            Needs a memory that keeps dedup marks (a :class:`~disco.clients.MemoryClient`).
    """

    version: str
    description: str
    capabilities: Sequence[AgentCapability]
    events: Sequence[EventDefinition]
    tags: Sequence[str]
    visibility: Visibility
    bus_settings: BusSettings | None
    client_settings: ServiceClientSettings | None
    register: bool
    validate_requests: bool
    heartbeat_interval_seconds: float | None
    ttl_seconds: int | None
    memory: AgentMemory | None
    registry: RegistryClient | None
    tracker: TrackerClient | None
    durable_dedup: bool | None


OPTION_NAMES: frozenset[str] = AgentOptions.__optional_keys__


def check_options(owner: str, options: Mapping[str, Any]) -> None:
    """Refuse a keyword that is no agent option, as a fixed signature would.

    Raises:
        TypeError: ``options`` has a name :class:`AgentOptions` does not define
            (the message lists the known ones).
    """
    unknown = sorted(set(options) - OPTION_NAMES)
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        raise TypeError(
            f"{owner}() got unexpected keyword argument(s) {names}; "
            f"the agent options are: {', '.join(sorted(OPTION_NAMES))}"
        )
