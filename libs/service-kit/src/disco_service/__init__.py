"""disco_service: what every disco service shares.

A service is thin: a :class:`ServiceSettings` subclass, a :class:`ServiceState`
subclass holding what it keeps while it runs, routers whose routes take
:data:`SessionDep` and :data:`IdentityDep` (list routes page with
:class:`Paginator`), and a ``main.py`` calling :func:`create_service_app` and
:func:`run_service`. The kit brings the
database (tenant-scoped transactions for row-level security), bearer-token
auth, the stable error shape, publish-after-commit through an outbox, health,
readiness, metrics, structured logs, the body limit and tracing.

Migrations import :mod:`disco_service.migration_helpers`.
"""

from disco_service._app import LifespanHook, create_service_app
from disco_service._auth import Identity, TokenVerifier
from disco_service._background import in_background
from disco_service._conditional import (
    NOT_MODIFIED_RESPONSE,
    cacheable_body,
    cacheable_json,
    entity_tag,
)
from disco_service._db import Database, driver_sql, on_driver, statement_alone
from disco_service._deps import (
    BusDep,
    IdentityDep,
    SessionDep,
    get_bus,
    get_identity,
    get_session,
    identify,
    identify_token,
    require_role,
)
from disco_service._erasure import (
    ERASURE_SOURCE,
    ErasureRepository,
    announce_erasure,
    erasure_follower,
)
from disco_service._errors import (
    BadRequest,
    Conflict,
    DiscoHTTPError,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    ServiceUnavailable,
    Unauthenticated,
    UnprocessableEntity,
    error_response,
    error_responses,
    install_error_handlers,
)
from disco_service._faults import database_unavailable, retry_while_unavailable
from disco_service._listen import listen, listening
from disco_service._logging import configure_logging
from disco_service._metrics import ServiceMetrics
from disco_service._operations import CheckResult, Liveness, Readiness
from disco_service._outbox import OutboxRelay, outbox_envelope, publish_after_commit
from disco_service._pagination import InvalidCursor, Keyset, PageRequest, Paginator
from disco_service._routing import JSONRoute
from disco_service._run import run_service
from disco_service._settings import (
    DEFAULT_DATABASE_URL,
    GatewayLinkSettings,
    ServiceSettings,
    settings_env_vars,
)
from disco_service._state import ReadinessCheck, ServiceState, get_state

__all__ = [
    "DEFAULT_DATABASE_URL",
    "ERASURE_SOURCE",
    "NOT_MODIFIED_RESPONSE",
    "BadRequest",
    "BusDep",
    "CheckResult",
    "Conflict",
    "Database",
    "DiscoHTTPError",
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
