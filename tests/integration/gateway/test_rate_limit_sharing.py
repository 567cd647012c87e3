"""Rate limits shared by instances through the real Postgres: a limit holds for every
instance together, a stopped instance's calls stay counted, expired counts go, and the
application role cannot read the counts (only the system function can)."""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import make_url, text

from disco._dev.ports import free_port
from disco_common.auth import Role
from disco_gateway import GatewaySettings
from disco_gateway.errors import RateLimited
from disco_gateway.ratelimits import CallLimits, parse_limits
from disco_gateway.ratelimits.lifespan import rate_limit_lifespan, share_once
from disco_gateway.ratelimits.repository import WindowCount, share_counts
from disco_gateway.scope import CallScope
from disco_gateway.state import GatewayState
from disco_service import Database, Identity
from tests.fixtures.infra import DatabaseUrls


def instance(tenant: str = "", anonymous: str = "") -> CallLimits:
    return CallLimits(
        tenant=parse_limits(tenant),
        anonymous=parse_limits(anonymous),
        registry=CollectorRegistry(),
    )


def caller(tenant: str) -> CallScope:
    return CallScope(Identity(tenant, "u", "u", frozenset({Role.USER})), agent="hello")


async def admitted(limits: CallLimits, scope: CallScope, calls: int) -> int:
    """How many of ``calls`` calls the limits let through."""
    through = 0
    for _ in range(calls):
        try:
            await limits.count(scope, "10.0.0.1")
        except RateLimited:
            continue
        through += 1
    return through


async def rows(database: DatabaseUrls, window_prefix: str) -> list[asyncpg.Record]:
    url = make_url(database.admin).set(drivername="postgresql")
    connection = await asyncpg.connect(url.render_as_string(hide_password=False))
    try:
        return await connection.fetch(
            "SELECT window_key, instance, tenant_id, hits FROM gateway.rate_limit_counts"
            " WHERE window_key LIKE $1 ORDER BY instance",
            f"%{window_prefix}%",
        )
    finally:
        await connection.close()


async def test_a_limit_holds_for_every_instance_together(db: Database) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    first, second = instance(tenant="5/hour"), instance(tenant="5/hour")

    assert await admitted(first, caller(tenant), 3) == 3
    await share_once(first, db)  # the first's 3 calls, written
    await share_once(second, db)  # ... and learned by the second

    assert await admitted(second, caller(tenant), 4) == 2
    with pytest.raises(RateLimited) as refused:
        await second.count(caller(tenant), None)
    assert 1 <= int(refused.value.headers["Retry-After"]) <= 3600
    # The first has not learned the second's calls yet: it lets 2 more through, the
    # most a share's interval can let through beyond the limit. Then it knows.
    await share_once(second, db)
    await share_once(first, db)
    assert await admitted(first, caller(tenant), 3) == 0
    # Another tenant's count is its own.
    assert await admitted(second, caller(f"{tenant}-other"), 5) == 5


async def test_a_stopped_instances_calls_stay_counted_until_their_window_ends(
    db: Database, database: DatabaseUrls
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    gone = instance(tenant="4/hour")
    assert await admitted(gone, caller(tenant), 4) == 4
    await share_once(gone, db)  # what a stopping instance does last
    del gone

    replacement = instance(tenant="4/hour")
    await share_once(replacement, db)
    assert await admitted(replacement, caller(tenant), 2) == 0

    (row,) = await rows(database, tenant)
    assert row["hits"] == 4
    assert row["instance"].startswith("gateway-")
    assert row["tenant_id"] == tenant  # what erasing the tenant finds it by


async def test_expired_counts_are_deleted_by_whichever_instance_shares_next(
    db: Database, database: DatabaseUrls
) -> None:
    marker = uuid.uuid4().hex
    async with db.unit_of_work(None) as session:
        await share_counts(
            session,
            "gateway-old",
            [
                WindowCount(f"LIMITER/tenant/{marker}/expired/1", 7, time.time() - 1),
                WindowCount(f"LIMITER/tenant/{marker}/live/1", 2, time.time() + 3600),
            ],
        )
    async with db.unit_of_work(None) as session:
        others = await share_counts(session, "gateway-new", [])

    assert [row["window_key"] for row in await rows(database, marker)] == [
        f"LIMITER/tenant/{marker}/live/1"
    ]
    assert others[f"LIMITER/tenant/{marker}/live/1"] == 2
    assert f"LIMITER/tenant/{marker}/expired/1" not in others


async def test_counts_that_could_not_be_shared_are_shared_next_time(
    db: Database, database: DatabaseUrls, settings: GatewaySettings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    limits = instance(tenant="10/hour")
    await admitted(limits, caller(tenant), 3)
    nowhere = make_url(settings.database_url).set(host="127.0.0.1", port=free_port())
    unreachable = Database(
        settings.model_copy(update={"database_url": nowhere.render_as_string(False)}),
        schema="gateway",
    )
    try:
        with pytest.raises(OSError):
            await share_once(limits, unreachable)
    finally:
        await unreachable.dispose()
    assert await rows(database, tenant) == []

    await share_once(limits, db)

    assert [row["hits"] for row in await rows(database, tenant)] == [3]


async def test_the_application_role_cannot_read_the_counts(
    db: Database, database: DatabaseUrls
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    limits = instance(tenant="10/hour")
    await admitted(limits, caller(tenant), 1)
    await share_once(limits, db)
    assert len(await rows(database, tenant)) == 1

    async with db.unit_of_work(tenant) as session:
        seen = await session.scalar(text("SELECT count(*) FROM gateway.rate_limit_counts"))
    assert seen == 0


async def test_a_stopping_instance_shares_its_counts_on_the_way_out(
    db: Database, database: DatabaseUrls, settings: GatewaySettings
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    state = GatewayState(
        settings.model_copy(
            update={"rate_limit_tenant": "10/hour", "rate_limit_share_seconds": 60.0}
        )
    )
    state.database = db
    async with rate_limit_lifespan(state):
        # The first exchange runs as the instance starts, before these calls; the next
        # would be a minute later.
        await until_shared(state)
        assert await admitted(state.call_limits, caller(tenant), 2) == 2
        assert await rows(database, tenant) == []

    assert [row["hits"] for row in await rows(database, tenant)] == [2]
    assert shared(state) == 2


def shared(state: GatewayState) -> float:
    """How many exchanges of counts went through, by the instance's own metric."""
    sample = state.metrics.registry.get_sample_value(
        "disco_gateway_rate_limit_shares_total", {"outcome": "ok"}
    )
    return sample or 0.0


async def until_shared(state: GatewayState) -> None:
    """Until the lifespan's first exchange is done (it runs in a task of its own)."""
    for _ in range(500):
        if shared(state):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no exchange of counts within 5 s")


async def test_without_limits_or_with_sharing_off_nothing_is_shared(
    settings: GatewaySettings,
) -> None:
    for update in ({"rate_limit_anonymous": ""}, {"rate_limit_share_seconds": 0.0}):
        state = GatewayState(settings.model_copy(update=update))
        # No database: the lifespan must not need one.
        async with rate_limit_lifespan(state):
            pass
        assert shared(state) == 0
