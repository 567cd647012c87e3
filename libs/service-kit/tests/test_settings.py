"""ServiceSettings: working dev defaults, real secrets required in production."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from disco.auth import DEV_AUTH_SECRET
from disco_service import DEFAULT_DATABASE_URL, ServiceSettings, settings_env_vars

REAL_SECRET = "3f1c9a7e5b2d4c6a8e0f1b3d5c7a9e2f4b6d8c0a1e3f5b7d"
REAL_DB = "postgresql://disco_app:s3cr3t-Pw@db:5432/disco"


def test_dev_defaults_work_without_any_variable() -> None:
    settings = ServiceSettings()
    assert settings.env == "dev"
    assert settings.database_url == DEFAULT_DATABASE_URL
    assert settings.hs256_secret() == DEV_AUTH_SECRET


def test_a_plain_postgresql_url_is_normalised_to_asyncpg() -> None:
    settings = ServiceSettings(database_url="postgresql://u:p@h:5432/d")
    assert settings.database_url == "postgresql+asyncpg://u:p@h:5432/d"


def test_a_non_postgres_url_is_refused() -> None:
    with pytest.raises(ValidationError, match="PostgreSQL"):
        ServiceSettings(database_url="mysql://u:p@h/d")


def test_production_without_a_secret_or_jwks_is_refused() -> None:
    with pytest.raises(ValidationError, match="DISCO_AUTH_JWKS_URL"):
        ServiceSettings(env="production", database_url=REAL_DB)


@pytest.mark.parametrize("secret", [DEV_AUTH_SECRET, "changethis", "too-short-secret"])
def test_production_refuses_a_placeholder_or_weak_secret(secret: str) -> None:
    with pytest.raises(ValidationError, match="DISCO_AUTH_SECRET"):
        ServiceSettings(env="production", auth_secret=secret, database_url=REAL_DB)


def test_production_refuses_the_default_database_password() -> None:
    with pytest.raises(ValidationError, match="placeholder password"):
        ServiceSettings(env="production", auth_secret=REAL_SECRET)


def test_production_with_a_jwks_url_has_no_hmac_secret() -> None:
    settings = ServiceSettings(
        env="production", auth_jwks_url="https://idp.example/jwks.json", database_url=REAL_DB
    )
    assert settings.hs256_secret() is None


def test_the_password_is_masked_for_logs() -> None:
    settings = ServiceSettings(database_url=REAL_DB)
    assert settings.redacted_database_url() == "postgresql+asyncpg://disco_app:***@db:5432/disco"


def test_settings_read_disco_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCO_KAFKA_BOOTSTRAP", "kafka:19092")
    monkeypatch.setenv("DISCO_MAX_BODY_BYTES", "2048")
    monkeypatch.setenv("DISCO_LOG_LEVEL", "debug")
    settings = ServiceSettings()
    assert (settings.kafka_bootstrap, settings.max_body_bytes, settings.log_level) == (
        "kafka:19092",
        2048,
        "DEBUG",
    )


def test_env_var_names_include_the_bus_and_service_settings() -> None:
    names = settings_env_vars(ServiceSettings)
    assert {"DISCO_KAFKA_BOOTSTRAP", "DISCO_TOPIC_PREFIX", "DISCO_DATABASE_URL"} <= set(names)
    assert names["DISCO_AUTH_JWKS_URL"] == "auth_jwks_url"
