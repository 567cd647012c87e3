"""The public names of disco.registry and the registry client are pinned."""

from __future__ import annotations

import disco.clients
import disco.registry


def test_disco_registry_exports_the_registrar_the_validator_and_its_error() -> None:
    assert disco.registry.__all__ == [
        "AgentRegistrar",
        "PayloadValidationError",
        "PayloadValidator",
    ]


def test_the_registry_client_is_exported_from_disco_clients() -> None:
    assert "RegistryClient" in disco.clients.__all__
    assert issubclass(disco.clients.RegistryClient, disco.clients.ServiceClient)


def test_a_payload_validation_error_is_a_value_error() -> None:
    assert issubclass(disco.registry.PayloadValidationError, ValueError)
