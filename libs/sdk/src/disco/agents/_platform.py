"""What an agent's handlers reach besides their input: the :class:`PlatformContext`,
and the :class:`AgentIdentity` of the instance running them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from disco.agents._errors import AgentError
from disco.agents._ports import AgentMemory, ContextMemory, RequestValidator
from disco.bus import BusClient

if TYPE_CHECKING:
    from disco.clients import RegistryClient, TrackerClient

__all__ = ["AgentIdentity", "PlatformContext"]


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
