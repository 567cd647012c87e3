"""A service's OpenAPI version is disco's one version (the repository's VERSION file)."""

from __future__ import annotations

from pathlib import Path

from disco_service import ServiceSettings, ServiceState, create_service_app

VERSION = (Path(__file__).resolve().parents[3] / "VERSION").read_text().strip()


def test_the_openapi_version_is_the_packages_version_unless_given() -> None:
    def app(version: str | None) -> str:
        state = ServiceState(ServiceSettings(service_name="kit-version", env="dev"))
        built = create_service_app(
            state, title="v", version=version, database=False, bus=False, outbox=False
        )
        return str(built.openapi()["info"]["version"])

    assert app(None) == VERSION
    assert app("9.9.9") == "9.9.9"
