"""Unit-test agents without a broker or services.

:class:`AgentTestKit` runs one or more agents in-process: what a handler
publishes is recorded and, by default, delivered to every agent in the kit
that handles it (each agent as its own consumer group, envelope ids
deduplicated), until nothing is left to deliver. Task and plan contexts live in
an :class:`InMemoryMemory` with the memory service's optimistic-concurrency
rules. So a Worker delegating to a Tool, a Planner driving both, or a HITL
question answered by the test all run in a plain ``pytest`` test::

    async def test_the_calculator_adds() -> None:
        async with AgentTestKit(calculator) as kit:
            request = await kit.request("calculate.requested", {"expression": "1+2"},
                                        response_event="calculated")
            assert kit.result_of(request).result == {"value": 3}

Requests for work no agent in the kit does stay unanswered until the test
answers them (:meth:`AgentTestKit.reply`); questions to humans until
:meth:`AgentTestKit.answer_human`. :meth:`AgentTestKit.crash_after` kills a
handler between a save and the publishing it promised (a :class:`CrashPoint`)
and redelivers its envelope, to prove that the work still finishes. Our own
integration tests still use the real broker and services; this kit is for agent
authors' unit tests.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

from pydantic import BaseModel, JsonValue

from disco._context import HandlerContext, handler_context, maybe_current_context
from disco._lifecycle import StartStop
from disco.agents import Agent, PlatformContext
from disco.agents._faults import CRASH_ENV, CRASH_EXIT_CODE, CrashPoint, set_crash_hook
from disco.agents._ports import RequestValidator
from disco.bus import BusClient, BusError, MessageTooLargeError
from disco.bus._wire import record_for
from disco.clients import ServiceConflictError, ServiceNotFoundError, ServiceValidationError
from disco.settings import BusSettings
from disco_common.envelope import ActionRequest, ActionResult, Envelope
from disco_common.ids import new_id
from disco_common.memory import (
    PlanContextRecord,
    PlanRecord,
    TaskContextRecord,
    WorkingMemoryEntry,
)
from disco_common.notifications import HumanInputRequest, HumanInputResponse, NotificationType
from disco_common.plans import PlanContextData, PlanStatus
from disco_common.tasks import ActionResultData, ErrorInfo, TaskContextData
from disco_common.topics import Topic

__all__ = [
    "CRASH_ENV",
    "CRASH_EXIT_CODE",
    "AgentTestKit",
    "Crash",
    "CrashPoint",
    "HandlerFailedError",
    "InMemoryMemory",
    "Published",
    "SimulatedCrash",
]

_TEST = "test"


def _now() -> datetime:
    return datetime.now(UTC)


ModelT = TypeVar("ModelT", bound=BaseModel)


def _over_the_wire(model: ModelT) -> ModelT:
    # What the service stores is what the client sends: the JSON dump, read
    # back from JSONB, which does not keep key order. Doing the same here keeps
    # the kit honest.
    dumped = json.dumps(model.model_dump(mode="json"), sort_keys=True)
    return type(model).model_validate_json(dumped)


def _filled(context: ModelT, name: str, value: str | None) -> ModelT:
    """``context`` with field ``name`` set to ``value`` (an argument of the save), as the
    client does; ``ValueError`` when the context says otherwise already."""
    current = getattr(context, name)
    if value is None or current == value:
        return context
    if current is not None:
        raise ValueError(f"{name} {value!r} contradicts context.{name} {current!r}")
    return context.model_copy(update={name: value})


class InMemoryMemory:
    """Task and plan contexts, working memory and plan records in dicts, with the
    memory service's rules (the suite runs the same scenarios against this and the
    service, so the two cannot drift).

    - Versions start at 1 and grow by one per write; ``expected_version`` (0: only
      if absent) raises :class:`~disco.clients.ServiceConflictError` (code
      ``version_conflict``, ``details`` naming both versions) as the service
      answers 409.
    - A sub-task id, or the correlation id of a task's question to a human, belongs
      to one live task (409 ``sub_task_claimed``); a correlation id to one plan
      (409 ``correlation_claimed``). A save replaces the ids a context is found by.
    - A context saved under another id than its own is refused
      (:class:`~disco.clients.ServiceValidationError`, 422), and a ``plan_id`` or
      ``session_id`` argument contradicting the context raises ``ValueError``, as
      the client does.
    - ``ttl_seconds`` sets ``expires_at``; once it passes, the entry is absent.
    - A plan id is created once (409 ``plan_exists``); a plan moves between statuses
      until it completes or fails (409 ``plan_finished``); an unknown plan is a
      :class:`~disco.clients.ServiceNotFoundError`.

    Values are copied in and out.

    Args:
        user_id: whose plan records these are (the service takes it from the caller's token).
    """

    def __init__(self, *, user_id: str = _TEST) -> None:
        self.user_id = user_id
        self.tasks: dict[str, TaskContextRecord] = {}
        self.plans: dict[str, PlanContextRecord] = {}
        self.plan_records: dict[str, PlanRecord] = {}
        self.working: dict[tuple[str, str], WorkingMemoryEntry] = {}
        self._by_subtask: dict[str, str] = {}
        self._by_correlation: dict[str, str] = {}
        self.writes = 0

    @staticmethod
    def _check_version(kind: str, key: str, current: int | None, expected: int | None) -> None:
        if expected is None or (current or 0) == expected:
            return
        if current is None:
            message = f"{kind} {key!r} does not exist, so it cannot be at version {expected}"
        else:
            message = f"{kind} {key!r} is at version {current}, not {expected}"
        raise ServiceConflictError(
            409,
            "version_conflict",
            message,
            {"expected_version": expected, "current_version": current},
        )

    @staticmethod
    def _expires_at(ttl_seconds: int | None) -> datetime | None:
        return _now() + timedelta(seconds=ttl_seconds) if ttl_seconds is not None else None

    @staticmethod
    def _expired(expires_at: datetime | None) -> bool:
        return expires_at is not None and expires_at <= _now()

    def _live_task(self, task_id: str) -> TaskContextRecord | None:
        record = self.tasks.get(task_id)
        if record is not None and self._expired(record.expires_at):
            self._forget_task(task_id)
            return None
        return record

    def _forget_task(self, task_id: str) -> TaskContextRecord | None:
        record = self.tasks.pop(task_id, None)
        for ref, owner in list(self._by_subtask.items()):
            if owner == task_id:
                del self._by_subtask[ref]
        return record

    async def store_task_context(
        self,
        task_id: str,
        context: TaskContextData,
        *,
        plan_id: str | None = None,
        ttl_seconds: int | None = None,
        expected_version: int | None = None,
    ) -> TaskContextRecord:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        context = _filled(context, "plan_id", plan_id)
        if context.task_id != task_id:
            raise ServiceValidationError(
                422,
                "validation_failed",
                f"context.task_id is {context.task_id!r} but the task is {task_id!r}",
            )
        refs = list(context.sub_task_ids)
        if context.human_input is not None and context.human_input.correlation_id not in refs:
            refs.append(context.human_input.correlation_id)
        claimed = {
            ref: owner
            for ref in refs
            if (owner := self._by_subtask.get(ref)) is not None
            and owner != task_id
            and self._live_task(owner) is not None
        }
        if claimed:
            raise ServiceConflictError(
                409,
                "sub_task_claimed",
                f"these sub-task ids already belong to other tasks: {claimed}",
                {"claimed": dict(claimed)},
            )
        existing = self._live_task(task_id)
        self._check_version(
            "task context", task_id, existing.version if existing else None, expected_version
        )
        now = _now()
        record = TaskContextRecord(
            version=(existing.version if existing else 0) + 1,
            task_id=task_id,
            plan_id=context.plan_id,
            sub_task_ids=list(context.sub_task_ids),
            context=_over_the_wire(context),
            expires_at=self._expires_at(ttl_seconds),
            created_at=existing.created_at if existing else now,
            updated_at=now,
        )
        self._forget_task(task_id)
        self.tasks[task_id] = record
        for ref in refs:
            self._by_subtask[ref] = task_id
        self.writes += 1
        return record.model_copy(deep=True)

    async def get_task_context(self, task_id: str) -> TaskContextRecord | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        record = self._live_task(task_id)
        return record.model_copy(deep=True) if record else None

    async def delete_task_context(self, task_id: str) -> bool:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        if self._live_task(task_id) is None:
            return False
        self._forget_task(task_id)
        return True

    async def get_task_by_subtask(self, sub_task_id: str) -> TaskContextRecord | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        task_id = self._by_subtask.get(sub_task_id)
        return await self.get_task_context(task_id) if task_id else None

    async def store_plan_context(
        self,
        plan_id: str,
        context: PlanContextData,
        *,
        session_id: str | None = None,
        expected_version: int | None = None,
    ) -> PlanContextRecord:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        context = _filled(context, "session_id", session_id)
        if context.plan_id != plan_id:
            raise ServiceValidationError(
                422,
                "validation_failed",
                f"context.plan_id is {context.plan_id!r} but the plan is {plan_id!r}",
            )
        ids = list(dict.fromkeys(context.correlation_ids))
        claimed = {
            cid: owner
            for cid in ids
            if (owner := self._by_correlation.get(cid)) is not None and owner != plan_id
        }
        if claimed:
            raise ServiceConflictError(
                409,
                "correlation_claimed",
                f"these correlation ids already belong to other plans: {claimed}",
                {"claimed": dict(claimed)},
            )
        existing = self.plans.get(plan_id)
        self._check_version(
            "plan context", plan_id, existing.version if existing else None, expected_version
        )
        now = _now()
        record = PlanContextRecord(
            version=(existing.version if existing else 0) + 1,
            plan_id=plan_id,
            session_id=context.session_id,
            correlation_ids=ids,
            context=_over_the_wire(context),
            created_at=existing.created_at if existing else now,
            updated_at=now,
        )
        if existing is not None:
            for correlation_id in existing.correlation_ids:
                self._by_correlation.pop(correlation_id, None)
        self.plans[plan_id] = record
        for correlation_id in ids:
            self._by_correlation[correlation_id] = plan_id
        self.writes += 1
        return record.model_copy(deep=True)

    async def get_plan_context(self, plan_id: str) -> PlanContextRecord | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        record = self.plans.get(plan_id)
        return record.model_copy(deep=True) if record else None

    async def get_plan_by_correlation(self, correlation_id: str) -> PlanContextRecord | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        plan_id = self._by_correlation.get(correlation_id)
        return await self.get_plan_context(plan_id) if plan_id else None

    def _live_entry(self, plan_id: str, key: str) -> WorkingMemoryEntry | None:
        entry = self.working.get((plan_id, key))
        if entry is not None and self._expired(entry.expires_at):
            del self.working[(plan_id, key)]
            return None
        return entry

    async def put_working(
        self,
        plan_id: str,
        key: str,
        value: JsonValue,
        *,
        ttl_seconds: int | None = None,
        expected_version: int | None = None,
    ) -> WorkingMemoryEntry:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        existing = self._live_entry(plan_id, key)
        self._check_version(
            "key", f"{plan_id}/{key}", existing.version if existing else None, expected_version
        )
        now = _now()
        entry = WorkingMemoryEntry(
            version=(existing.version if existing else 0) + 1,
            plan_id=plan_id,
            key=key,
            value=json.loads(json.dumps(value)),
            expires_at=self._expires_at(ttl_seconds),
            created_at=existing.created_at if existing else now,
            updated_at=now,
        )
        self.working[(plan_id, key)] = entry
        return entry.model_copy(deep=True)

    async def get_working(self, plan_id: str, key: str) -> WorkingMemoryEntry | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        entry = self._live_entry(plan_id, key)
        return entry.model_copy(deep=True) if entry else None

    async def delete_working(self, plan_id: str, key: str) -> bool:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        return self._live_entry(plan_id, key) is not None and bool(
            self.working.pop((plan_id, key), None)
        )

    async def store(self, key: str, value: JsonValue, plan_id: str) -> bool:
        await self.put_working(plan_id, key, value)
        return True

    async def retrieve(self, key: str, plan_id: str) -> JsonValue | None:
        entry = await self.get_working(plan_id, key)
        return entry.value if entry is not None else None

    async def create_plan(
        self,
        goal_event: str,
        response_event: str,
        *,
        goal_data: Mapping[str, JsonValue] | None = None,
        plan_id: str | None = None,
        plan_type: str | None = None,
        session_id: str | None = None,
        parent_plan_id: str | None = None,
        status: PlanStatus = PlanStatus.PENDING,
    ) -> PlanRecord:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        if parent_plan_id is not None and parent_plan_id not in self.plan_records:
            raise ServiceValidationError(
                422, "unknown_parent_plan", f"parent_plan_id {parent_plan_id!r} names no plan"
            )
        key = plan_id or new_id()
        if key in self.plan_records:
            raise ServiceConflictError(409, "plan_exists", f"plan {key!r} exists already")
        now = _now()
        record = PlanRecord(
            version=1,
            plan_id=key,
            goal_event=goal_event,
            goal_data=json.loads(json.dumps(dict(goal_data or {}))),
            response_event=response_event,
            plan_type=plan_type,
            status=status,
            session_id=session_id,
            parent_plan_id=parent_plan_id,
            user_id=self.user_id,
            created_at=now,
            updated_at=now,
            completed_at=now if status.is_final else None,
        )
        self.plan_records[key] = record
        return record.model_copy(deep=True)

    async def get_plan(self, plan_id: str) -> PlanRecord | None:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        record = self.plan_records.get(plan_id)
        return record.model_copy(deep=True) if record else None

    async def update_plan_status(
        self,
        plan_id: str,
        status: PlanStatus,
        *,
        reason: str | None = None,
        expected_version: int | None = None,
    ) -> PlanRecord:
        await asyncio.sleep(0)  # a real service call yields: let other handlers interleave
        current = self.plan_records.get(plan_id)
        if current is None:
            raise ServiceNotFoundError(404, "not_found", f"no plan {plan_id!r}")
        if expected_version is not None:
            self._check_version("plan", plan_id, current.version, expected_version)
        if current.status == status and current.status_reason == reason:
            return current.model_copy(deep=True)
        if current.status.is_final and current.status != status:
            raise ServiceConflictError(
                409,
                "plan_finished",
                f"plan {plan_id!r} is {current.status.value}; a finished plan cannot become "
                f"{status.value}",
            )
        now = _now()
        record = current.model_copy(
            update={
                "version": current.version + 1,
                "status": status,
                "status_reason": reason,
                "updated_at": now,
                "completed_at": now if status.is_final else None,
            }
        )
        self.plan_records[plan_id] = record
        return record.model_copy(deep=True)


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

    async def _write_envelope(self, name: str, envelope: Envelope) -> asyncio.Future[Any]:
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
        self._members = [_Member(agent, _KitBus(self, agent.name)) for agent in agents]
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
                    memory=cast(Any, self.memory),
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
        **attributes: Any,
    ) -> ActionRequest:
        """Publish a request on ``action-requests`` as an outside caller; then :meth:`settle`."""
        request: ActionRequest = await self._outside.request(
            event_type, data, response_event=response_event, **self._scope(attributes)
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
        **attrs: Any,
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
    ) -> Envelope:
        """Answer a ``notification.human_input`` question (the latest one by default).

        ``timed_out=True`` answers as the tracker does when nobody answered.
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
        envelope = await self._outside.publish(
            Topic.NOTIFICATION_EVENTS,
            body.response_event,
            response,
            **self._scope(
                {
                    "correlation_id": question.correlation_id,
                    "plan_id": question.plan_id,
                    "task_id": question.task_id,
                    "session_id": question.session_id,
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
            context = HandlerContext(envelope=envelope, topic=logical, group=member.agent.name)
            try:
                with handler_context(context):
                    await dispatch(envelope)
            except SimulatedCrash as crash:
                # Never committed: the envelope comes again, to whoever takes over.
                self.crashes.append(Crash(crash.point, member.agent.name, envelope))
                member.seen.discard(envelope.id)
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
        """Answers published on ``action-results`` (for ``correlation_id``)."""
        return [
            e
            for e in self.events(Topic.ACTION_RESULTS)
            if isinstance(e, ActionResult)
            and (correlation_id is None or e.correlation_id == correlation_id)
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
