"""The discovery cache's rules, without a database: what it keeps, for how long, and
what drops it (the integration tests show the same against real writes)."""

from __future__ import annotations

import time

from disco_registry.discovery.cache import ALL_TENANTS, DiscoveryCache, DiscoveryKey


def key(tenant: str, consumed: str = "add.requested") -> DiscoveryKey:
    return (tenant, (), consumed, None, None, 50)


def listening_cache(max_bytes: int = 1_000_000, max_age_seconds: float = 60.0) -> DiscoveryCache:
    cache = DiscoveryCache(max_bytes=max_bytes, max_age_seconds=max_age_seconds)
    cache.listening()
    return cache


def keep(cache: DiscoveryCache, k: DiscoveryKey, text: str, fresh: float | None = None) -> None:
    cache.put(k, cache.ticket(), text, fresh, asked_at=time.monotonic())


def test_an_answer_is_served_until_its_first_instance_expires() -> None:
    cache = listening_cache()
    cache.put(key("t"), cache.ticket(), "[1]", 30.0, asked_at=time.monotonic())
    cache.put(key("t", "gone"), cache.ticket(), "[2]", 5.0, asked_at=time.monotonic() - 5.0)

    assert cache.get(key("t")) == "[1]"
    assert cache.get(key("t", "gone")) is None
    assert cache.size_bytes == len("[1]")


def test_no_answer_outlives_the_maximum_age_even_with_no_instance_to_expire() -> None:
    cache = listening_cache(max_age_seconds=10.0)
    cache.put(key("t"), cache.ticket(), "[]", None, asked_at=time.monotonic() - 10.0)
    cache.put(key("u"), cache.ticket(), "[]", None, asked_at=time.monotonic() - 9.0)

    assert cache.get(key("t")) is None
    assert cache.get(key("u")) == "[]"


def test_an_answer_asked_before_a_change_arrived_is_not_kept() -> None:
    cache = listening_cache()
    ticket = cache.ticket()
    cache.changed("someone-else")  # any change: the answer may predate it

    cache.put(key("t"), ticket, "[stale]", 30.0, asked_at=time.monotonic())

    assert cache.get(key("t")) is None


def test_a_change_drops_its_tenants_answers_and_a_public_change_drops_all() -> None:
    cache = listening_cache()
    for tenant in ("a", "b", "c"):
        keep(cache, key(tenant), f"[{tenant}]")

    cache.changed("a")
    assert [cache.get(key(t)) for t in ("a", "b", "c")] == [None, "[b]", "[c]"]

    cache.wrote("b", public=True)
    assert [cache.get(key(t)) for t in ("a", "b", "c")] == [None, None, None]
    assert cache.size_bytes == 0


def test_nothing_is_kept_or_served_while_changes_cannot_be_heard() -> None:
    cache = DiscoveryCache(max_bytes=1_000_000, max_age_seconds=60.0)
    keep(cache, key("t"), "[before listening]")
    assert cache.get(key("t")) is None
    assert not cache.trusted

    cache.listening()
    keep(cache, key("t"), "[heard]")
    assert cache.get(key("t")) == "[heard]"

    cache.lost()
    assert cache.get(key("t")) is None
    keep(cache, key("t"), "[while deaf]")
    assert cache.get(key("t")) is None

    cache.listening()
    assert cache.get(key("t")) is None  # what was kept before the loss is gone


def test_the_oldest_answers_go_first_when_the_cache_is_full() -> None:
    cache = listening_cache(max_bytes=10)
    keep(cache, key("t", "a"), "aaaa")
    keep(cache, key("t", "b"), "bbbb")
    assert cache.get(key("t", "a")) == "aaaa"  # now a is the most recently used

    keep(cache, key("t", "c"), "cccc")

    assert cache.get(key("t", "b")) is None
    assert cache.get(key("t", "a")) == "aaaa"
    assert cache.get(key("t", "c")) == "cccc"
    assert cache.size_bytes == 8
    keep(cache, key("t", "huge"), "x" * 11)  # larger than the whole cache: not kept
    assert cache.get(key("t", "huge")) is None


def test_a_cache_of_no_size_or_no_age_keeps_nothing() -> None:
    for cache in (listening_cache(max_bytes=0), listening_cache(max_age_seconds=0)):
        keep(cache, key("t"), "[]")
        assert not cache.enabled
        assert cache.get(key("t")) is None


def test_a_new_answer_for_a_key_replaces_the_old_one() -> None:
    cache = listening_cache()
    keep(cache, key("t"), "[old]")
    keep(cache, key("t"), "[newer]")

    assert cache.get(key("t")) == "[newer]"
    assert cache.size_bytes == len("[newer]")
    cache.changed(ALL_TENANTS)
    assert cache.size_bytes == 0
