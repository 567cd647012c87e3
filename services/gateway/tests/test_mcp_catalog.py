"""The MCP tool listings of a gateway instance: reused, refreshed behind the callers' backs,
read afresh after agents changed (a directory that counts what it is asked; no I/O)."""

from __future__ import annotations

import asyncio

from disco_common.a2a_cards import A2ACardSource
from disco_common.registry import DiscoveredCapability, DiscoveredEvent
from disco_gateway.mcp.catalog import ToolCatalog
from disco_gateway.mcp.context import View
from disco_gateway.settings import GatewaySettings


def _agent(name: str) -> A2ACardSource:
    return A2ACardSource(
        name=name,
        description=name,
        version="1.0.0",
        tenant_id="acme",
        capabilities=[
            DiscoveredCapability(
                task_name="run",
                consumed_event=DiscoveredEvent(
                    event_type=f"{name}.requested", topic="action-requests"
                ),
            )
        ],
    )


class _Directory:
    def __init__(self, *names: str) -> None:
        self.names = list(names)
        self.listed = 0
        self.release = asyncio.Event()
        self.release.set()

    async def agents(self, tenant_id: str) -> list[A2ACardSource]:
        self.listed += 1
        await self.release.wait()
        return [_agent(name) for name in self.names]

    async def agent(self, tenant_id: str, name: str) -> A2ACardSource | None:
        return _agent(name) if name in self.names else None


def _catalog(directory: _Directory, **settings: object) -> ToolCatalog:
    values = {"registry_cache_seconds": 60.0, "mcp_page_size": 2, **settings}
    return ToolCatalog(directory, GatewaySettings(**values))  # type: ignore[arg-type]


ACME = View("acme", anonymous=False)


async def test_a_listing_is_reused_then_refreshed_while_the_old_one_is_served() -> None:
    directory = _Directory("a", "b")
    catalog = _catalog(directory, registry_cache_seconds=0.0)
    first = await catalog.listing(ACME)
    directory.names.append("c")
    directory.release.clear()  # the refresh hangs on the registry
    served = await catalog.listing(ACME)
    assert served is first  # no wait for the registry
    directory.release.set()
    await asyncio.sleep(0.01)
    assert [e.source.name for e in (await catalog.listing(ACME)).entries] == ["a", "b", "c"]


async def test_after_agents_changed_the_next_listing_waits_for_a_fresh_one() -> None:
    directory = _Directory("a")
    catalog = _catalog(directory)
    await catalog.listing(ACME)
    directory.names.append("b")
    assert [e.name for e in (await catalog.listing(ACME)).entries] == ["a__run"]
    catalog.invalidate()
    assert [e.name for e in (await catalog.listing(ACME)).entries] == ["a__run", "b__run"]


async def test_pages_are_cut_by_name_and_a_new_agent_is_found_before_the_listing_knows_it() -> None:
    directory = _Directory("c", "a", "b")
    catalog = _catalog(directory)
    first = await catalog.page(ACME, None)
    second = await catalog.page(ACME, first.next_cursor)
    assert [t.name for t in first.tools] == ["a__run", "b__run"]
    assert [t.name for t in second.tools] == ["c__run"]
    assert second.next_cursor is None
    directory.names.append("d")
    found = await catalog.find(ACME, "d__run")
    assert found is not None
    assert found.source.name == "d"


async def test_without_a_token_only_the_public_agents_are_listed_or_found() -> None:
    directory = _Directory("hello", "secret")
    catalog = _catalog(directory, gateway_public_agents=("hello",))
    anonymous = View("acme", anonymous=True)
    assert [e.name for e in (await catalog.listing(anonymous)).entries] == ["hello__run"]
    assert await catalog.find(anonymous, "secret__run") is None
    assert await catalog.find(ACME, "secret__run") is not None
