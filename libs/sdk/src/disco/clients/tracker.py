"""``TrackerClient``: the typed client of the tracker service (``/v1/tracker/...``).

Agents never report progress to the tracker over HTTP (it reads
``system-events``); they and the people behind them *read* from it: plans with
their state machines, tasks, fan-out groups, timelines, metrics, a live feed,
and the questions to humans. The one thing written is a plan type (a
Planner registers its state machines when it starts). The tenant always comes
from the token (and, inside a bus handler, from the envelope being handled).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime

import httpx
from httpx_sse import SSEError, aconnect_sse

from disco.clients._base import ServiceClient, ServiceNotFoundError, ServiceUnavailableError
from disco.clients._paging import pages, query_of, query_params, segment
from disco_common.pagination import Page, PageQuery
from disco_common.plans import PlanDefinition, PlanRegistrationRequest, PlanStatus
from disco_common.tasks import TaskStatus
from disco_common.tracker import (
    AgentMetrics,
    DelegationGroupProgress,
    EventTypeMetrics,
    FeedEvent,
    HumanInputWaitQuery,
    HumanInputWaitRecord,
    HumanInputWaitStatus,
    MetricsQuery,
    PlanProgress,
    PlanProgressQuery,
    PlanTreeNode,
    PlanTypeRecord,
    PlanView,
    TaskProgress,
    TaskProgressQuery,
    TaskView,
    TimelineEntry,
)

__all__ = ["TrackerClient"]

_BASE = "/v1/tracker"
_HITL = f"{_BASE}/hitl"
_PLANS = f"{_BASE}/plans"
_PLAN_TYPES = f"{_BASE}/plan-types"
_FEED_READ_TIMEOUT = 60.0
"""Seconds without a byte before a feed connection is deemed dead (the tracker pings every 15)."""
_RECONNECT_MAX_SECONDS = 10.0


class TrackerClient(ServiceClient):
    """Client of the tracker service: what runs, how it went, and the questions to humans.

    Use as ``async with TrackerClient.from_settings() as tracker: ...`` or
    ``start()``/``stop()``. Errors are :class:`~disco.clients.ServiceError`
    subclasses carrying the tracker's ``code``; a lookup of one thing returns
    None when the tracker does not know it.

    Example — the plans that failed today, and why::

        async for plan in tracker.iter_plans(status="failed", started_after=midnight):
            print(plan.plan_id, plan.current_state, plan.error)

    Example — follow changes live (resumes after a dropped connection)::

        async for change in tracker.feed():
            print(change.kind, change.plan_id, change.status)
    """

    service_name = "tracker"

    # -- plans -----------------------------------------------------------------------------

    async def list_plans(
        self,
        query: PlanProgressQuery | None = None,
        *,
        status: PlanStatus | str | None = None,
        plan_type: str | None = None,
        session_id: str | None = None,
        parent_plan_id: str | None = None,
        root_only: bool | None = None,
        agent_name: str | None = None,
        started_after: datetime | None = None,
        started_before: datetime | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[PlanProgress]:
        """One page of the tenant's plans, newest first.

        Args:
            query: the whole query; or give its filters as keywords.
            status, plan_type, session_id: only plans with these.
            parent_plan_id: only the sub-plans of this plan.
            root_only: only plans that are nobody's sub-plan.
            agent_name: plans run by this planner, or in which this agent did a task.
            started_after, started_before: the start time range (after inclusive).
            cursor: the ``next_cursor`` of the previous page.
            limit: plans per page.

        Raises:
            ValueError: a filter is not valid, before anything is sent.
            ServiceValidationError: the tracker refused the query (e.g. a stale cursor).
        """
        if query is None:
            query = query_of(
                PlanProgressQuery,
                status=status,
                plan_type=plan_type,
                session_id=session_id,
                parent_plan_id=parent_plan_id,
                root_only=root_only,
                agent_name=agent_name,
                started_after=started_after,
                started_before=started_before,
                cursor=cursor,
                limit=limit,
            )
        return await self.call("GET", _PLANS, Page[PlanProgress], params=query_params(query))

    async def iter_plans(
        self,
        query: PlanProgressQuery | None = None,
        *,
        status: PlanStatus | str | None = None,
        plan_type: str | None = None,
        session_id: str | None = None,
        parent_plan_id: str | None = None,
        root_only: bool | None = None,
        agent_name: str | None = None,
        started_after: datetime | None = None,
        started_before: datetime | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[PlanProgress]:
        """Every plan matching the filters (as for :meth:`list_plans`), page after page."""
        if query is None:
            query = query_of(
                PlanProgressQuery,
                status=status,
                plan_type=plan_type,
                session_id=session_id,
                parent_plan_id=parent_plan_id,
                root_only=root_only,
                agent_name=agent_name,
                started_after=started_after,
                started_before=started_before,
                limit=limit,
            )
        async for plan in pages(query, self.list_plans):
            yield plan

    async def get_plan(self, plan_id: str) -> PlanView | None:
        """A plan: where it stands, its registered state machine and its moves (None if unknown)."""
        return await self.call_or_none("GET", f"{_PLANS}/{segment(plan_id)}", PlanView)

    async def list_plan_tasks(
        self,
        plan_id: str,
        *,
        status: TaskStatus | str | None = None,
        agent_name: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[TaskProgress]:
        """One page of a plan's tasks, in the order they were asked for.

        Raises:
            ServiceNotFoundError: the tracker knows no such plan.
        """
        query = query_of(
            TaskProgressQuery, status=status, agent_name=agent_name, cursor=cursor, limit=limit
        )
        return await self.call(
            "GET",
            f"{_PLANS}/{segment(plan_id)}/tasks",
            Page[TaskProgress],
            params=query_params(query),
        )

    async def iter_plan_tasks(
        self,
        plan_id: str,
        *,
        status: TaskStatus | str | None = None,
        agent_name: str | None = None,
    ) -> AsyncIterator[TaskProgress]:
        """Every task of a plan, in the order they were asked for."""
        query = query_of(TaskProgressQuery, status=status, agent_name=agent_name)

        async def fetch(q: TaskProgressQuery) -> Page[TaskProgress]:
            return await self.list_plan_tasks(
                plan_id, status=q.status, agent_name=q.agent_name, cursor=q.cursor, limit=q.limit
            )

        async for task in pages(query, fetch):
            yield task

    async def plan_timeline(
        self, plan_id: str, *, cursor: str | None = None, limit: int | None = None
    ) -> Page[TimelineEntry]:
        """One page of a plan's timeline: every envelope, in the order it happened.

        Raises:
            ServiceNotFoundError: the tracker knows no such plan.
        """
        query = query_of(PageQuery, cursor=cursor, limit=limit)
        return await self.call(
            "GET",
            f"{_PLANS}/{segment(plan_id)}/timeline",
            Page[TimelineEntry],
            params=query_params(query),
        )

    async def iter_timeline(self, plan_id: str) -> AsyncIterator[TimelineEntry]:
        """A plan's whole timeline, in the order it happened."""

        async def fetch(q: PageQuery) -> Page[TimelineEntry]:
            return await self.plan_timeline(plan_id, cursor=q.cursor, limit=q.limit)

        async for entry in pages(PageQuery(limit=200), fetch):
            yield entry

    async def plan_tree(self, plan_id: str) -> PlanTreeNode | None:
        """A plan and its sub-plans, nested (None if the plan is unknown)."""
        return await self.call_or_none("GET", f"{_PLANS}/{segment(plan_id)}/tree", PlanTreeNode)

    # -- tasks and fan-out groups ----------------------------------------------------------

    async def get_task(self, task_id: str) -> TaskView | None:
        """A task with its questions to humans and what it delegated (None if unknown)."""
        return await self.call_or_none("GET", f"{_BASE}/tasks/{segment(task_id)}", TaskView)

    async def get_delegation(self, group_id: str) -> DelegationGroupProgress | None:
        """A fan-out group and how many of its sub-tasks came back (None if unknown)."""
        return await self.call_or_none(
            "GET", f"{_BASE}/delegations/{segment(group_id)}", DelegationGroupProgress
        )

    # -- metrics ---------------------------------------------------------------------------

    async def agent_metrics(
        self,
        *,
        window_seconds: int | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[AgentMetrics]:
        """Per agent over the last ``window_seconds`` (default one hour): tasks ended,
        failed and timed out, unfinished ones, mean/p50/p95/p99 duration."""
        query = query_of(MetricsQuery, window_seconds=window_seconds, cursor=cursor, limit=limit)
        return await self.call(
            "GET", f"{_BASE}/metrics/agents", Page[AgentMetrics], params=query_params(query)
        )

    async def event_type_metrics(
        self,
        *,
        window_seconds: int | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[EventTypeMetrics]:
        """Per event type and topic over the last ``window_seconds``: envelopes, errors, and
        for requests the mean/p50/p95/p99 time to the answer."""
        query = query_of(MetricsQuery, window_seconds=window_seconds, cursor=cursor, limit=limit)
        return await self.call(
            "GET",
            f"{_BASE}/metrics/event-types",
            Page[EventTypeMetrics],
            params=query_params(query),
        )

    # -- plan types ------------------------------------------------------------------------

    async def register_plan_type(
        self, definition: PlanDefinition, *, version: str = "1.0.0"
    ) -> PlanTypeRecord:
        """Register ``definition`` as ``version`` of its plan type (idempotent for the same one).

        Raises:
            ServiceConflictError: (``plan_type_version_conflict``) the version is registered
                with another definition; register it as a new version.
        """
        body = PlanRegistrationRequest(plan=definition, version=version)
        return await self.call("POST", _PLAN_TYPES, PlanTypeRecord, json=body)

    async def get_plan_type(
        self, plan_type: str, *, version: str | None = None
    ) -> PlanTypeRecord | None:
        """A registered plan type (its latest version, or ``version``), or None."""
        return await self.call_or_none(
            "GET",
            f"{_PLAN_TYPES}/{segment(plan_type)}",
            PlanTypeRecord,
            params={"version": version} if version is not None else None,
        )

    async def list_plan_types(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> Page[PlanTypeRecord]:
        """One page of the tenant's plan types (their latest versions), by name."""
        query = query_of(PageQuery, cursor=cursor, limit=limit)
        return await self.call("GET", _PLAN_TYPES, Page[PlanTypeRecord], params=query_params(query))

    # -- the live feed ---------------------------------------------------------------------

    async def feed(
        self, *, after: int | None = None, plan_id: str | None = None, reconnect: bool = True
    ) -> AsyncIterator[FeedEvent]:
        """Changes to the tenant's plans and tasks as they happen (server-sent events).

        Args:
            after: start after this change id (``0``: every change the tracker still
                keeps); by default, with the next change.
            plan_id: only the changes of this plan.
            reconnect: when the connection drops, connect again and go on after the
                last change received (``Last-Event-ID``), so nothing is missed or
                repeated; otherwise raise.

        Raises:
            ServiceUnavailableError: the tracker could not be reached (only without
                ``reconnect``).
            ServiceValidationError: the tracker refused the position.
        """
        http = self._require_http()
        last = after
        delay = 0.2
        params = {"plan_id": plan_id} if plan_id is not None else None
        while True:
            headers = await self._headers()
            if last is not None:
                headers["Last-Event-ID"] = str(last)
            try:
                async with aconnect_sse(
                    http,
                    "GET",
                    f"{_BASE}/feed",
                    params=params,
                    headers=headers,
                    timeout=httpx.Timeout(self._timeout, read=_FEED_READ_TIMEOUT),
                ) as source:
                    response = source.response
                    if response.status_code >= 400:
                        await response.aread()
                        raise self._error(response, "GET", str(response.url))
                    async for message in source.aiter_sse():
                        if not message.data:
                            continue
                        change = FeedEvent.model_validate_json(message.data)
                        last = change.id
                        delay = 0.2
                        yield change
            except (httpx.TransportError, SSEError) as exc:
                if not reconnect:
                    raise ServiceUnavailableError(
                        503,
                        "unavailable",
                        f"the tracker's feed at {self.base_url} was lost: {exc!r}",
                        method="GET",
                        url=f"{self.base_url}{_BASE}/feed",
                    ) from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RECONNECT_MAX_SECONDS)

    # -- questions to humans (HITL) --------------------------------------------------------

    async def list_questions(
        self,
        query: HumanInputWaitQuery | None = None,
        *,
        status: HumanInputWaitStatus | str | None = None,
        task_id: str | None = None,
        plan_id: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[HumanInputWaitRecord]:
        """One page of the tenant's questions to humans, oldest first.

        Args:
            query: the whole query; or give its filters as keywords.
            status: only questions in this state (``waiting`` is the inbox of
                open questions, with or without a timeout).
            task_id, plan_id: only the questions of this task or plan.
            cursor: the ``next_cursor`` of the previous page.
            limit: questions per page (the tracker's default when omitted).

        Raises:
            ValueError: a filter is not valid (an unknown status, a bad limit), before
                anything is sent.
            ServiceValidationError: the tracker refused the query (e.g. a stale cursor).
        """
        if query is None:
            query = query_of(
                HumanInputWaitQuery,
                status=status,
                task_id=task_id,
                plan_id=plan_id,
                cursor=cursor,
                limit=limit,
            )
        return await self.call("GET", _HITL, Page[HumanInputWaitRecord], params=query_params(query))

    async def iter_questions(
        self,
        *,
        status: HumanInputWaitStatus | str | None = None,
        task_id: str | None = None,
        plan_id: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[HumanInputWaitRecord]:
        """Every question matching the filters, oldest first, fetching page after page."""
        query = query_of(
            HumanInputWaitQuery, status=status, task_id=task_id, plan_id=plan_id, limit=limit
        )

        async def fetch(q: HumanInputWaitQuery) -> Page[HumanInputWaitRecord]:
            return await self.list_questions(
                status=q.status,
                task_id=q.task_id,
                plan_id=q.plan_id,
                cursor=q.cursor,
                limit=q.limit,
            )

        async for item in pages(query, fetch):
            yield item

    async def get_question(self, correlation_id: str) -> list[HumanInputWaitRecord]:
        """The question(s) with ``correlation_id`` (one per response event), or ``[]``.

        A question is waiting, answered, timed out, or answered late (after the
        timeout was published; the asker ignores such an answer).
        """
        try:
            return await self.call(
                "GET", f"{_HITL}/{segment(correlation_id)}", list[HumanInputWaitRecord]
            )
        except ServiceNotFoundError:
            return []
