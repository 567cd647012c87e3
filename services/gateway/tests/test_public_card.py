"""The gateway's public card says why it lists no agent, and how to make one public."""

from __future__ import annotations

import pytest

from disco_common.a2a_cards import A2ACardSource
from disco_common.registry import DiscoveredCapability, DiscoveredEvent, Visibility
from disco_gateway import GatewaySettings
from disco_gateway.cards.service import gateway_card

URL = "https://agents.example.com"


class _Directory:
    """The agents the registry would list for the public tenant."""

    def __init__(self, *sources: A2ACardSource) -> None:
        self.sources = list(sources)

    async def agents(self, tenant_id: str) -> list[A2ACardSource]:
        return [source for source in self.sources if source.tenant_id == tenant_id]


def _agent(name: str, visibility: Visibility = Visibility.TENANT) -> A2ACardSource:
    return A2ACardSource(
        name=name,
        tenant_id="default",
        visibility=visibility,
        capabilities=[
            DiscoveredCapability(
                task_name=name,
                consumed_event=DiscoveredEvent(
                    event_type=f"{name}.requested", topic="action-requests"
                ),
            )
        ],
    )


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> GatewaySettings:
    monkeypatch.delenv("DISCO_GATEWAY_PUBLIC_AGENTS", raising=False)
    monkeypatch.delenv("DISCO_GATEWAY_PUBLIC_TENANT", raising=False)
    monkeypatch.setenv("DISCO_GATEWAY_PUBLIC_URL", URL)
    return GatewaySettings()


async def test_agents_running_but_none_public_is_explained(settings: GatewaySettings) -> None:
    directory = _Directory(*(_agent(name) for name in ("hello", "trip-planner", "assistant")))

    card, _ = await gateway_card(directory, settings)  # type: ignore[arg-type]

    assert card.skills == []
    assert "none yet" not in card.description
    assert card.description == (
        "disco's A2A gateway. No agent is public, so this card lists none: the agents take a "
        f"bearer token, each at {URL}/a2a/<agent> with its own card, and the extended card "
        f"(GET {URL}/a2a/extendedAgentCard with a token) lists the token's tenant's agents. "
        "To make an agent public (listed here and callable without a token), name it in the "
        "gateway's DISCO_GATEWAY_PUBLIC_AGENTS (comma-separated) and run it in tenant "
        "'default' (DISCO_GATEWAY_PUBLIC_TENANT)."
    )


async def test_a_public_agent_is_listed_as_before(
    settings: GatewaySettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISCO_GATEWAY_PUBLIC_AGENTS", "hello")
    directory = _Directory(_agent("hello"), _agent("assistant"))

    card, _ = await gateway_card(directory, GatewaySettings())  # type: ignore[arg-type]

    assert [skill.id for skill in card.skills] == ["hello/hello"]
    assert "Agents: hello." in card.description
