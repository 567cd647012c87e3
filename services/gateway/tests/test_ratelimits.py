"""Rate limits: each call counts against its tenant, or without a token its address."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from disco_common.auth import Role
from disco_gateway import GatewaySettings
from disco_gateway.errors import RateLimited
from disco_gateway.ratelimits import CallLimits, parse_limits
from disco_gateway.scope import CallScope
from disco_service import Identity


def caller(tenant: str, *, anonymous: bool = False) -> CallScope:
    identity = Identity(tenant, "u", "u", frozenset({Role.USER}))
    return CallScope(identity, agent="hello", anonymous=anonymous)


def limits(tenant: str = "", anonymous: str = "") -> tuple[CallLimits, CollectorRegistry]:
    registry = CollectorRegistry()
    made = CallLimits(
        tenant=parse_limits(tenant), anonymous=parse_limits(anonymous), registry=registry
    )
    return made, registry


async def test_a_tenant_over_its_limit_is_refused_with_when_to_come_back() -> None:
    calls, registry = limits(tenant="3/minute")
    for _ in range(3):
        await calls.count(caller("acme"), "10.0.0.1")

    with pytest.raises(RateLimited) as refused:
        await calls.count(caller("acme"), "10.0.0.2")  # another address: still acme's calls

    assert refused.value.status_code == 429
    assert refused.value.code == "rate_limited"
    assert 1 <= int(refused.value.headers["Retry-After"]) <= 60
    assert refused.value.message == (
        "Too many calls: the limit of your tenant's calls is 3 per 1 minute; "
        f"try again in {refused.value.headers['Retry-After']} s."
    )
    assert registry.get_sample_value("disco_gateway_rate_limited_total", {"kind": "tenant"}) == 1


async def test_each_tenant_and_each_anonymous_address_has_its_own_count() -> None:
    calls, registry = limits(tenant="1/minute", anonymous="1/minute")
    await calls.count(caller("acme"), "10.0.0.1")
    await calls.count(caller("globex"), "10.0.0.1")
    await calls.count(caller("public", anonymous=True), "10.0.0.1")
    await calls.count(caller("public", anonymous=True), "10.0.0.2")

    with pytest.raises(RateLimited, match="without a token"):
        await calls.count(caller("public", anonymous=True), "10.0.0.1")
    assert registry.get_sample_value("disco_gateway_rate_limited_total", {"kind": "anonymous"})


async def test_every_limit_of_a_setting_holds() -> None:
    calls, _ = limits(tenant="100/second;2/minute")
    await calls.count(caller("acme"), None)
    await calls.count(caller("acme"), None)

    with pytest.raises(RateLimited, match="2 per 1 minute"):
        await calls.count(caller("acme"), None)


async def test_no_limits_count_nothing() -> None:
    calls, _ = limits()
    for _ in range(1000):
        await calls.count(caller("acme"), None)
        await calls.count(caller("public", anonymous=True), "10.0.0.1")


def test_the_anonymous_limit_is_on_by_default_and_the_tenant_one_off() -> None:
    settings = GatewaySettings(env="dev")

    assert parse_limits(settings.rate_limit_anonymous)
    assert parse_limits(settings.rate_limit_tenant) == []


@pytest.mark.parametrize("text", ["lots", "5/fortnight", "5 per"])
def test_a_limit_in_another_notation_is_refused_at_startup(text: str) -> None:
    with pytest.raises(ValidationError, match="50/second;1000/minute"):
        GatewaySettings(env="dev", rate_limit_tenant=text)


async def test_a_tenant_of_its_own_limits_counts_by_them() -> None:
    calls = CallLimits(
        tenant=parse_limits("1/minute"),
        anonymous=[],
        registry=CollectorRegistry(),
        per_tenant={"big": parse_limits("3/minute"), "ops": parse_limits("")},
    )
    for _ in range(3):
        await calls.count(caller("big"), None)
    for _ in range(50):
        await calls.count(caller("ops"), None)  # unlimited
    await calls.count(caller("small"), None)

    with pytest.raises(RateLimited, match="3 per 1 minute"):
        await calls.count(caller("big"), None)
    with pytest.raises(RateLimited, match="1 per 1 minute"):
        await calls.count(caller("small"), None)


def test_limits_per_tenant_are_read_as_json_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCO_GATEWAY_RATE_LIMIT_PER_TENANT", '{"big": "3/minute", "ops": ""}')

    assert GatewaySettings(env="dev").rate_limit_per_tenant == {"big": "3/minute", "ops": ""}
    with pytest.raises(ValidationError, match="the limits of tenant 'big'"):
        GatewaySettings(env="dev", rate_limit_per_tenant={"big": "lots"})


async def test_the_gateway_counts_by_the_limits_of_its_settings() -> None:
    from disco_gateway.state import GatewayState

    settings = GatewaySettings(
        env="dev", rate_limit_tenant="2/minute", rate_limit_per_tenant={"big": "3/minute"}
    )
    limits = GatewayState(settings).call_limits
    for _ in range(3):
        await limits.count(caller("big"), None)
    for _ in range(2):
        await limits.count(caller("small"), None)

    for tenant in ("big", "small"):
        with pytest.raises(RateLimited):
            await limits.count(caller(tenant), None)


async def test_the_other_instances_hits_count_against_a_limit_as_this_ones_do() -> None:
    calls, _ = limits(tenant="4/hour")
    await calls.count(caller("acme"), None)
    (window,) = calls.windows.changed()
    assert window.hits == 1
    assert window.expires_at > time.time()

    calls.windows.learn({window.window_key: 3})  # three more, on the other instances

    with pytest.raises(RateLimited, match="4 per 1 hour"):
        await calls.count(caller("acme"), None)
    assert calls.windows.changed() == []  # the refused call changed nothing to share
    calls.windows.learn({})  # their window ended: this instance's own call is left
    await calls.count(caller("acme"), None)
    (window,) = calls.windows.changed()
    assert window.hits == 2


async def test_counts_not_shared_are_offered_again() -> None:
    calls, _ = limits(tenant="10/hour")
    await calls.count(caller("acme"), None)
    await calls.count(caller("globex"), None)
    offered = calls.windows.changed()
    assert calls.windows.changed() == []

    calls.windows.unshared(offered)

    assert sorted(count.window_key for count in calls.windows.changed()) == sorted(
        count.window_key for count in offered
    )


def test_limits_are_shared_every_second_by_default_and_can_be_kept_per_instance() -> None:
    assert GatewaySettings(env="dev").rate_limit_share_seconds == 1.0
    assert GatewaySettings(env="dev", rate_limit_share_seconds=0).rate_limit_share_seconds == 0
    with pytest.raises(ValidationError):
        GatewaySettings(env="dev", rate_limit_share_seconds=-1)
    assert limits(anonymous="1/second")[0].any
    assert limits(tenant="1/second")[0].any
    assert not limits()[0].any
