"""Each typed client finds its service's URL in the settings (DISCO_<SERVICE>_URL)."""

from __future__ import annotations

import pytest

from disco.clients import (
    MemoryClient,
    RegistryClient,
    ServiceClient,
    ServiceClientSettings,
    TrackerClient,
)

SETTINGS = ServiceClientSettings(
    registry_url="http://registry.test:1/",
    memory_url="http://memory.test:2",
    tracker_url="http://tracker.test:3",
)


@pytest.mark.parametrize(
    ("client", "url"),
    [
        (RegistryClient, "http://registry.test:1"),
        (MemoryClient, "http://memory.test:2"),
        (TrackerClient, "http://tracker.test:3"),
    ],
)
def test_a_client_built_from_settings_talks_to_its_own_service(
    client: type[ServiceClient], url: str
) -> None:
    assert client.from_settings(SETTINGS).base_url == url


def test_the_base_client_is_built_with_a_url_not_from_settings() -> None:
    with pytest.raises(TypeError, match=r"ServiceClient\(base_url, \.\.\.\)"):
        ServiceClient.from_settings(SETTINGS)

    assert ServiceClient("http://other.test/").base_url == "http://other.test"
