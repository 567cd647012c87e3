"""The console's Agents page: one row per agent name, however many processes registered it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from disco_common.registry import AgentRecord, AgentStatus
from disco_gateway.console.service import group_agents

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def _record(
    agent_id: str, status: AgentStatus, heard_minutes_ago: int, **more: object
) -> AgentRecord:
    heard = NOW - timedelta(minutes=heard_minutes_ago)
    return AgentRecord.model_validate(
        {
            "agent_id": agent_id,
            "tenant_id": "acme",
            "name": agent_id.split(".")[0],
            "version": "1.0.0",
            "ttl_seconds": 30,
            "status": status,
            "registered_at": heard,
            "updated_at": heard,
            "last_heartbeat_at": heard,
            "expires_at": heard + timedelta(seconds=30),
            **more,
        }
    )


def test_registrations_are_grouped_by_name_live_names_first() -> None:
    groups = group_agents(
        [
            _record("zeta.1", AgentStatus.EXPIRED, 300),
            _record("alpha.old", AgentStatus.EXPIRED, 120, description="old"),
            _record("alpha.new", AgentStatus.LIVE, 1, description="new", live_instances=2),
            _record("alpha.late", AgentStatus.EXPIRED, 0, description="stopped just now"),
            _record("beta.1", AgentStatus.LIVE, 2, live_instances=1),
            _record("beta.2", AgentStatus.LIVE, 3, live_instances=1),
        ]
    )

    assert [(g.name, g.status) for g in groups] == [
        ("alpha", "live"),
        ("beta", "live"),
        ("zeta", "expired"),
    ]
    alpha, beta, zeta = groups
    # What the row shows comes from the live registration heard from last.
    assert alpha.latest.agent_id == "alpha.new"
    assert (alpha.live, alpha.registrations, alpha.live_instances) == (1, 3, 2)
    assert (beta.live, beta.registrations, beta.live_instances) == (2, 2, 2)
    assert (zeta.live, zeta.registrations, zeta.live_instances) == (0, 1, 0)
