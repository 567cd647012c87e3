"""The in-process test kit: :class:`AgentTestKit` and what it records."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import Unpack

from disco._context import HandlerContext, handler_context, maybe_current_context
from disco._faults import CrashPoint, set_crash_hook
from disco._lifecycle import StartStop
from disco._steps import StepLog
from disco.agents import Agent, PlatformContext
from disco.agents._ports import RequestValidator
from disco.bus import (
    BusClient,
    BusError,
    ContextAttributes,
    EnvelopeAttributes,
    MessageTooLargeError,
)
from disco.bus._wire import record_for
from disco.settings import BusSettings
from disco.testing._memory import InMemoryMemory
from disco_common.a2a import (
    A2A_MESSAGE_ATTRIBUTE,
    ACTION_PROGRESSED,
    A2AMessageContext,
    ActionProgressedData,
)
from disco_common.envelope import ActionRequest, ActionResult, Envelope
from disco_common.notifications import HumanInputRequest, HumanInputResponse, NotificationType
from disco_common.tasks import ActionResultData, ErrorInfo
from disco_common.topics import Topic

__all__ = [
    "AgentTestKit",
    "Crash",
    "HandlerFailedError",
    "Published",
    "SimulatedCrash",
]

_TEST = "test"


@dataclass(frozen=True, slots=True)
class Published:
    """One envelope a handler (or the test) published."""

    topic: str
    envelope: Envelope
    publisher: str


class _KitBus(BusClient):
    """A BusClient that hands envelopes to the kit instead of a broker."""

    def __init__(self, kit: AgentTestKit, name: str) -> None:
        super().__init__(BusSettings(topic_prefix=""), name=name)
        self._kit = kit

    @property
    def started(self) -> bool:
        return True

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def ensure_topics(self, topics: Iterable[Any] | None = None) -> list[str]:
        return [str(topic) for topic in topics or Topic]

    async def _write_envelope(
        self, name: str, envelope: Envelope, receiver: Any = None
    ) -> asyncio.Future[Any]:
        # Always a future (the publisher reads it when there is one), receiver or not.
        if self._request_validator is not None and isinstance(envelope, ActionRequest):
            await self._request_validator(envelope.type, envelope.data)
        record = record_for(envelope)
        limit = self.settings.bus_max_message_bytes
        if record.size > limit:
            raise MessageTooLargeError(name, envelope.type, record.size, limit)
        self._kit._published(name, envelope, self.name)
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    async def _reply_listener(self, topic: str) -> Any:
        # Waiting inside a handler would block the kit's single delivery loop:
        # refuse at once, saying what to do instead.
        raise BusError(
            "request(..., wait=...) needs a broker; in an AgentTestKit publish with "
            "kit.request(...) and read kit.result_of(request)"
        )


@dataclass
class _Member:
    agent: Agent
    bus: _KitBus
    steps: StepLog
    seen: set[str] = field(default_factory=set)


class HandlerFailedError(AssertionError):
    """A handler raised while the kit delivered an envelope (the bus would retry, then DLQ)."""


class SimulatedCrash(BaseException):
    """Raised at an armed crash point: the handler stops dead there, as if its process died.

    A ``BaseException``, so that no ``except Exception`` in a handler or in the
    agent layers gets to act on it (a dead process does nothing more).
    """

    def __init__(self, point: CrashPoint) -> None:
        super().__init__(f"simulated crash after {point.value}")
        self.point = point


@dataclass(frozen=True, slots=True)
class Crash:
    """A handler the kit killed at a crash point (its envelope was delivered again)."""

    point: CrashPoint
    agent: str
    envelope: Envelope


@dataclass
class _ArmedCrash:
    point: CrashPoint
    agent: str | None
    skip: int
    remaining: int


class AgentTestKit(StartStop):
    """Runs agents in-process, with an in-memory bus and memory (see the module docs).

    Args:
        *agents: the agents under test (each keeps its own handlers and name).
        memory: the memory to use (a fresh :class:`InMemoryMemory` by default).
        validator: checks ``action-requests`` payloads, as the registry would.
        loopback: deliver what handlers publish to the kit's agents (default true);
            with false, only what the test publishes is delivered (and :meth:`deliver`).
        tenant_id, user_id: put on envelopes the test publishes.
        raise_errors: re-raise a handler's exception from :meth:`settle`
            (default true), instead of only recording it in :attr:`errors`.
    """

    def __init__(
        self,
        *agents: Agent,
        memory: InMemoryMemory | None = None,
        validator: RequestValidator | None = None,
        loopback: bool = True,
        tenant_id: str | None = "test",
        user_id: str | None = "tester",
        raise_errors: bool = True,
    ) -> None:
        if not agents:
            raise ValueError("AgentTestKit needs at least one agent")
        self.memory = memory if memory is not None else InMemoryMemory()
        self.validator = validator
        self.loopback = loopback
        self.tenant_id = tenant_id
        self.user_id = user_id
        self.raise_errors = raise_errors
        self.published: list[Published] = []
        self.errors: list[tuple[str, Envelope, BaseException]] = []
        self.crashes: list[Crash] = []
        """Handlers killed at a crash point (see :meth:`crash_after`), oldest first."""
        self._armed: list[_ArmedCrash] = []
        self._queue: deque[Published] = deque()
        self._redeliveries: deque[tuple[str, Envelope, Agent]] = deque()
        self._members = [
            _Member(agent, _KitBus(self, agent.name), StepLog(self.memory, agent.name))
            for agent in agents
        ]
        self._outside = _KitBus(self, _TEST)
        self._started = False

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Attach the agents (no broker, no services). Idempotent."""
        if self._started:
            return
        for member in self._members:
            if self.validator is not None:
                member.bus.set_request_validator(self.validator.validate)
            member.agent._attach(
                PlatformContext(
                    bus=member.bus,
                    memory=self.memory,
                    registry=None,
                    agent=member.agent.identity,
                    validator=self.validator,
                )
            )
        set_crash_hook(self._crash_hook)
        self._started = True

    async def stop(self) -> None:
        """Detach the agents. Idempotent."""
        if self._started:
            set_crash_hook(None)
        for member in self._members:
            member.agent._detach()
        self._started = False

    # -- publishing as the test -----------------------------------------------------------

    def _scope(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        scope = dict(attributes)
        if self.tenant_id is not None:
            scope.setdefault("tenant_id", self.tenant_id)
        if self.user_id is not None:
            scope.setdefault("user_id", self.user_id)
        return scope

    async def request(
        self,
        event_type: str,
        data: Any = None,
        *,
        response_event: str,
        settle: bool = True,
        a2a: A2AMessageContext | None = None,
        **attributes: Unpack[ContextAttributes],
    ) -> ActionRequest:
        """Publish a request on ``action-requests`` as an outside caller; then :meth:`settle`.

        ``a2a``: the request comes from an A2A caller's message, as the gateway sends it
        (the handler's ``request.a2a`` / ``task.a2a``).
        """
        scope = self._scope(attributes)
        if a2a is not None:
            scope[A2A_MESSAGE_ATTRIBUTE] = a2a.to_attribute()
        request: ActionRequest = await self._outside.request(
            event_type, data, response_event=response_event, **scope
        )
        if settle:
            await self.settle()
        return request

    async def publish(
        self,
        topic: str | Topic,
        event_type: str,
        data: Any = None,
        *,
        settle: bool = True,
        **attrs: Unpack[EnvelopeAttributes],
    ) -> Envelope:
        """Publish any event as the test; then :meth:`settle`."""
        envelope = await self._outside.publish(topic, event_type, data, **self._scope(attrs))
        if settle:
            await self.settle()
        return envelope

    async def reply(
        self,
        request: ActionRequest,
        result: Any = None,
        *,
        error: ErrorInfo | BaseException | str | None = None,
        settle: bool = True,
    ) -> ActionResult:
        """Answer ``request`` as the agent it was meant for would (success, or ``error``)."""
        if error is None:
            outcome = ActionResultData(success=True, result=result)
        else:
            info = (
                error
                if isinstance(error, ErrorInfo)
                else ErrorInfo.from_exception(error)
                if isinstance(error, BaseException)
                else ErrorInfo(type="Error", message=error)
            )
            outcome = ActionResultData(success=False, error=info)
        envelope = await self._outside.respond(
            request.response_event,
            outcome,
            correlation_id=request.correlation_id or request.id,
            topic=request.response_topic,
            **self._scope({"plan_id": request.plan_id, "session_id": request.session_id}),
        )
        if settle:
            await self.settle()
        return envelope.as_(ActionResult) if not isinstance(envelope, ActionResult) else envelope

    async def answer_human(
        self,
        question: Envelope | None = None,
        answer: Any = None,
        *,
        timed_out: bool = False,
        settle: bool = True,
        a2a: A2AMessageContext | None = None,
    ) -> Envelope:
        """Answer a ``notification.human_input`` question (the latest one by default).

        ``timed_out=True`` answers as the tracker does when nobody answered; ``a2a``
        answers as an A2A caller's message does through the gateway (``result.a2a``).
        """
        if question is None:
            asked = self.questions()
            if not asked:
                raise AssertionError("no question to a human was published")
            question = asked[-1]
        body = HumanInputRequest.model_validate(question.data)
        response = HumanInputResponse(
            answer=None if timed_out else answer,
            timed_out=timed_out,
            request_id=question.id,
            task_id=body.task_id,
            plan_id=body.plan_id,
            answered_by=None if timed_out else self.user_id,
        )
        attributes = self._scope(
            {
                "correlation_id": question.correlation_id,
                "plan_id": question.plan_id,
                "task_id": question.task_id,
                "session_id": question.session_id,
            }
        )
        if a2a is None:
            envelope = await self._outside.publish(
                Topic.NOTIFICATION_EVENTS, body.response_event, response, **attributes
            )
        else:
            envelope = await self._outside.publish_envelope(
                Topic.NOTIFICATION_EVENTS,
                Envelope.from_dict(
                    {
                        **{key: value for key, value in attributes.items() if value is not None},
                        "source": f"disco://{_TEST}",
                        "type": body.response_event,
                        "data": response.model_dump(mode="json", exclude_none=True),
                        A2A_MESSAGE_ATTRIBUTE: a2a.to_attribute(),
                    }
                ),
            )
        if settle:
            await self.settle()
        return envelope

    # -- crashes -----------------------------------------------------------------------------

    def crash_after(
        self,
        point: CrashPoint | str,
        *,
        agent: Agent | None = None,
        skip: int = 0,
        times: int = 1,
    ) -> None:
        """Kill the next handler (of ``agent``) that reaches ``point``, ``times`` times.

        ``skip`` lets the first ``skip`` arrivals at ``point`` pass (e.g.
        ``skip=1`` spares a task's first delegation and kills its second).

        The handler stops right there, after its save and before what the save
        promised is published, as if its process had died; nothing the agent
        layers would do afterwards happens. The kit then delivers its envelope
        again (once the queue is empty, as the bus redelivers an uncommitted
        envelope to the instance that takes over), so a test can check that
        the task or plan still finishes, exactly once. :attr:`crashes` lists
        the crashes.

        Raises:
            ValueError: ``point`` is not a :class:`CrashPoint` (the message lists them).
        """
        try:
            where = CrashPoint(point)
        except ValueError:
            known = [p.value for p in CrashPoint]
            raise ValueError(f"unknown crash point {point!r}; the crash points: {known}") from None
        self._armed.append(
            _ArmedCrash(where, agent.name if agent is not None else None, skip, times)
        )

    def _crash_hook(self, point: CrashPoint) -> None:
        context = maybe_current_context()
        running = context.group if context is not None else None
        for armed in self._armed:
            if armed.point is not point or armed.agent not in (None, running):
                continue
            if armed.skip > 0:
                armed.skip -= 1
            elif armed.remaining > 0:
                armed.remaining -= 1
                raise SimulatedCrash(point)

    # -- delivering -------------------------------------------------------------------------

    def _published(self, name: str, envelope: Envelope, publisher: str) -> None:
        item = Published(name, envelope, publisher)
        self.published.append(item)
        if self.loopback or publisher == _TEST:
            self._queue.append(item)

    async def deliver(
        self, topic: str | Topic, envelope: Envelope, *, to: Agent | None = None
    ) -> None:
        """Hand ``envelope`` to every agent that handles it on ``topic`` (as the bus would).

        ``to`` hands it to that agent only (e.g. one of two instances of a Worker).
        """
        logical = str(topic)
        for member in self._members:
            if to is not None and member.agent is not to:
                continue
            dispatch = member.agent._dispatcher(logical, envelope.type)
            if dispatch is None or envelope.id in member.seen:
                continue
            member.seen.add(envelope.id)
            context = HandlerContext(
                envelope=envelope, topic=logical, group=member.agent.name, steps=member.steps
            )
            try:
                with handler_context(context):
                    await dispatch(envelope)
            except SimulatedCrash as crash:
                # Never committed: the envelope comes again, to whoever takes over.
                self.crashes.append(Crash(crash.point, member.agent.name, envelope))
                member.seen.discard(envelope.id)
                member.steps.forget(envelope.id)  # what the dead process knew is gone
                self._redeliveries.append((logical, envelope, member.agent))
            except Exception as exc:
                self.errors.append((member.agent.name, envelope, exc))
                if self.raise_errors:
                    raise HandlerFailedError(
                        f"agent {member.agent.name!r} failed on {envelope.type!r} ({logical}): "
                        f"{exc!r}"
                    ) from exc

    async def settle(self, max_deliveries: int = 10_000) -> None:
        """Deliver queued envelopes until none is left.

        Raises:
            HandlerFailedError: a handler raised (with ``raise_errors``).
            AssertionError: more than ``max_deliveries`` (a loop of events).
        """
        for _ in range(max_deliveries):
            if self._queue:
                item = self._queue.popleft()
                await self.deliver(item.topic, item.envelope)
            elif self._redeliveries:
                topic, envelope, agent = self._redeliveries.popleft()
                await self.deliver(topic, envelope, to=agent)
            else:
                return
        raise AssertionError(f"still delivering after {max_deliveries} envelopes: a loop?")

    # -- reading what happened ------------------------------------------------------------------

    def events(self, topic: str | Topic, event_type: str | None = None) -> list[Envelope]:
        """Envelopes published on ``topic`` (of ``event_type``), oldest first."""
        return [
            item.envelope
            for item in self.published
            if item.topic == str(topic) and (event_type is None or item.envelope.type == event_type)
        ]

    def requests(self, event_type: str | None = None) -> list[ActionRequest]:
        """Requests published on ``action-requests`` (of ``event_type``)."""
        return [
            e
            for e in self.events(Topic.ACTION_REQUESTS, event_type)
            if isinstance(e, ActionRequest)
        ]

    def answers(self, correlation_id: str | None = None) -> list[ActionResult]:
        """Answers published on ``action-results`` (for ``correlation_id``).

        Partial answers (``action.progressed``) are not answers: see :meth:`progress`.
        """
        return [
            e
            for e in self.events(Topic.ACTION_RESULTS)
            if isinstance(e, ActionResult)
            and e.type != ACTION_PROGRESSED
            and (correlation_id is None or e.correlation_id == correlation_id)
        ]

    def progress(self, correlation_id: str) -> list[ActionProgressedData]:
        """The partial answers sent for ``correlation_id`` (status updates, artifacts), in order."""
        return [
            ActionProgressedData.model_validate(e.data)
            for e in self.events(Topic.ACTION_RESULTS, ACTION_PROGRESSED)
            if e.correlation_id == correlation_id
        ]

    def result_of(self, request: ActionRequest) -> ActionResultData:
        """The one answer to ``request``, read as :class:`ActionResultData`.

        Raises:
            AssertionError: no answer, or more than one.
        """
        answers = self.answers(request.correlation_id or request.id)
        if len(answers) != 1:
            raise AssertionError(
                f"expected one answer to {request.type!r}, got {len(answers)}: "
                f"{[a.data for a in answers]}"
            )
        return ActionResultData.model_validate(answers[0].data)

    def system_events(self, event_type: str | None = None) -> list[Envelope]:
        """Lifecycle events on ``system-events`` (of ``event_type``)."""
        return self.events(Topic.SYSTEM_EVENTS, event_type)

    def questions(self) -> list[Envelope]:
        """Questions to humans (``notification.human_input``) published so far."""
        return self.events(Topic.NOTIFICATION_EVENTS, NotificationType.HUMAN_INPUT.value)
