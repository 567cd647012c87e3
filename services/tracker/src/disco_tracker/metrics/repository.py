"""SQL of the metrics: per agent from the tasks, per event type from the minute counts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_service import Keyset

__all__ = ["MetricsRepository"]

_AGENT_ORDER = Keyset("agent_name")
_EVENT_TYPE_ORDER = Keyset("c.event_type", "c.topic")


def _percentiles(value: str, condition: str) -> str:
    return ", ".join(
        f"percentile_cont({fraction}) WITHIN GROUP (ORDER BY {value}) "
        f"FILTER (WHERE {condition}) AS p{name}_duration_ms"
        for name, fraction in (("50", 0.5), ("95", 0.95), ("99", 0.99))
    )


_ENDED = "final_at >= :since"
_AGENT_AGGREGATES = ", ".join(
    [
        f"count(*) FILTER (WHERE {_ENDED}) AS count",
        f"count(*) FILTER (WHERE {_ENDED} AND final_status = 'failed') AS errors",
        f"count(*) FILTER (WHERE {_ENDED} AND final_status = 'failed' "
        "AND error->>'type' = 'hitl_timeout') AS timed_out",
        "count(*) FILTER (WHERE final_at IS NULL) AS in_progress",
        f"avg(duration_ms) FILTER (WHERE {_ENDED}) AS mean_duration_ms",
        _percentiles("duration_ms", _ENDED),
        "max(updated_at) AS last_activity_at",
    ]
)
_REQUEST_DURATIONS = " ".join(
    [
        "SELECT event_type, avg(ms) AS mean_duration_ms,",
        _percentiles("ms", "true"),
        "FROM (SELECT event_type,",
        "GREATEST(0, EXTRACT(EPOCH FROM final_at - requested_at) * 1000) AS ms",
        "FROM tracker.tasks WHERE tenant_id = :tenant AND final_at >= :since",
        "AND requested_at IS NOT NULL AND event_type IS NOT NULL) d GROUP BY event_type",
    ]
)


class MetricsRepository:
    """Aggregates over one tenant's read model."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self.session = session
        self.tenant_id = tenant_id

    async def agents(
        self, *, since: datetime, after: tuple[str, ...] | None, limit: int
    ) -> Sequence[RowMapping]:
        """Per agent: tasks that ended since ``since`` (counts, durations), and unfinished ones."""
        seek, params = _AGENT_ORDER.after(after)
        params.update(tenant=self.tenant_id, since=since, limit=limit)
        statement = text(
            " ".join(
                [
                    "SELECT agent_name,",
                    _AGENT_AGGREGATES,
                    "FROM tracker.tasks WHERE tenant_id = :tenant AND agent_name IS NOT NULL",
                    f"AND {seek} AND (final_at >= :since",
                    "OR (final_at IS NULL AND updated_at >= :since))",
                    f"GROUP BY agent_name {_AGENT_ORDER.order_by} LIMIT :limit",
                ]
            )
        )
        result = await self.session.execute(statement, params)
        return result.mappings().all()

    async def event_types(
        self, *, since: datetime, after: tuple[str, ...] | None, limit: int
    ) -> Sequence[RowMapping]:
        """Per event type and topic: envelopes and errors since ``since``; for requests, the
        time to their answers."""
        seek, params = _EVENT_TYPE_ORDER.after(after)
        params.update(tenant=self.tenant_id, since=since, limit=limit)
        statement = text(
            " ".join(
                [
                    "WITH counts AS (SELECT event_type, topic, sum(count)::bigint AS count,",
                    "sum(errors)::bigint AS error_count, max(minute) AS last_seen_at",
                    "FROM tracker.event_counts WHERE tenant_id = :tenant",
                    "AND minute >= date_trunc('minute', CAST(:since AS timestamptz))",
                    "GROUP BY event_type, topic),",
                    f"durations AS ({_REQUEST_DURATIONS})",
                    "SELECT c.event_type, c.topic, c.count, c.error_count, c.last_seen_at,",
                    "d.mean_duration_ms, d.p50_duration_ms, d.p95_duration_ms,",
                    "d.p99_duration_ms FROM counts c LEFT JOIN durations d",
                    "ON c.topic = 'action-requests' AND d.event_type = c.event_type",
                    f"WHERE {seek} {_EVENT_TYPE_ORDER.order_by} LIMIT :limit",
                ]
            )
        )
        result = await self.session.execute(statement, params)
        return result.mappings().all()
