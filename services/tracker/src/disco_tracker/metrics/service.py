"""Metrics over a window: per agent and per event type (counts, errors, p50/p95/p99)."""

from __future__ import annotations

from datetime import timedelta

from disco_common.ids import utcnow
from disco_common.pagination import Page
from disco_common.tracker import AgentMetrics, EventTypeMetrics, MetricsQuery
from disco_service import Paginator
from disco_tracker.metrics.repository import MetricsRepository

__all__ = ["agent_metrics", "event_type_metrics"]

# Sort keys: (agent_name,) and (event_type, topic), by name. The window is part of the
# filters, so a cursor of another window is refused.
_AGENT_PAGES = Paginator("agent_metrics", tuple[str])
_EVENT_TYPE_PAGES = Paginator("event_type_metrics", tuple[str, str])


async def agent_metrics(repository: MetricsRepository, query: MetricsQuery) -> Page[AgentMetrics]:
    """Per agent, by name: the tasks that ended in the window and the unfinished ones.

    Raises:
        InvalidCursor: the cursor was not issued by this list for this window.
    """
    request = _AGENT_PAGES.open(query)
    end = utcnow()
    start = end - timedelta(seconds=query.window_seconds)
    rows = await repository.agents(since=start, after=request.after, limit=request.fetch)
    return request.page(
        rows,
        key=lambda row: (row["agent_name"],),
        item=lambda row: AgentMetrics(**dict(row), window_start=start, window_end=end),
    )


async def event_type_metrics(
    repository: MetricsRepository, query: MetricsQuery
) -> Page[EventTypeMetrics]:
    """Per event type and topic, by name: envelopes, errors and (requests) answer times.

    Raises:
        InvalidCursor: the cursor was not issued by this list for this window.
    """
    request = _EVENT_TYPE_PAGES.open(query)
    end = utcnow()
    start = end - timedelta(seconds=query.window_seconds)
    rows = await repository.event_types(since=start, after=request.after, limit=request.fetch)
    return request.page(
        rows,
        key=lambda row: (row["event_type"], row["topic"]),
        item=lambda row: EventTypeMetrics(**dict(row), window_start=start, window_end=end),
    )
