"""The kit's public names are deliberate: adding or removing one is an API change."""

from __future__ import annotations

import disco_service
import disco_service.migration_helpers


def test_the_kit_exports_exactly_its_public_api() -> None:
    assert sorted(disco_service.__all__) == [
        "BadRequest",
        "BusDep",
        "CheckResult",
        "Conflict",
        "DEFAULT_DATABASE_URL",
        "Database",
        "DiscoHTTPError",
        "ERASURE_SOURCE",
        "ErasureRepository",
        "Forbidden",
        "GatewayLinkSettings",
        "Identity",
        "IdentityDep",
        "InvalidCursor",
        "JSONRoute",
        "Keyset",
        "LifespanHook",
        "Liveness",
        "NOT_MODIFIED_RESPONSE",
        "NotFound",
        "OutboxRelay",
        "PageRequest",
        "Paginator",
        "PayloadTooLarge",
        "Readiness",
        "ReadinessCheck",
        "ServiceMetrics",
        "ServiceSettings",
        "ServiceState",
        "ServiceUnavailable",
        "SessionDep",
        "TokenVerifier",
        "Unauthenticated",
        "UnprocessableEntity",
        "announce_erasure",
        "cacheable_body",
        "cacheable_json",
        "configure_logging",
        "create_service_app",
        "database_unavailable",
        "driver_sql",
        "entity_tag",
        "erasure_follower",
        "error_response",
        "error_responses",
        "get_bus",
        "get_identity",
        "get_session",
        "get_state",
        "identify",
        "identify_token",
        "in_background",
        "install_error_handlers",
        "listen",
        "listening",
        "on_driver",
        "outbox_envelope",
        "publish_after_commit",
        "require_role",
        "retry_while_unavailable",
        "run_service",
        "settings_env_vars",
        "statement_alone",
    ]


def test_every_exported_name_exists() -> None:
    for module in (disco_service, disco_service.migration_helpers):
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert missing == []
