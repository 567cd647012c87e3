"""The console's pages (``/console``): server-rendered HTML, htmx for the live parts.

Routes are thin: the signed-in person (:data:`ConsoleUserDep`, else the login
page), one call into :mod:`disco_gateway.console.service` or
:mod:`~disco_gateway.console.dead_letters`, one template. Errors a page can
meet (a service down, an unknown plan, a bad filter) render as an HTML page
with the service's message, not as JSON (:class:`ConsoleRoute`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import structlog
from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError

from disco.clients import ServiceAuthError, ServiceError, ServiceUnavailableError
from disco_common.asyncapi import AsyncApiFormat
from disco_common.plans import PlanStatus
from disco_common.registry import AgentCapability
from disco_common.tracker import PlanProgressQuery
from disco_gateway.console import service
from disco_gateway.console.auth import (
    COOKIE,
    COOKIE_PATH,
    ConsoleUser,
    ConsoleUserDep,
    LoginRequired,
    login_redirect,
    safe_next,
    verify_token,
)
from disco_gateway.console.bus import bus_download, bus_view
from disco_gateway.console.clients import ConsoleClients, console_clients
from disco_gateway.console.dead_letters import read_dead_letters, republish
from disco_gateway.console.payloads import payload_html
from disco_gateway.mcp.tools import tool_names
from disco_gateway.state import GatewayState
from disco_service import DiscoHTTPError, database_unavailable

__all__ = ["console_lifespan", "router", "static_files"]

_HERE = Path(__file__).parent
templates = Jinja2Templates(directory=_HERE / "templates")
log = structlog.get_logger("disco_gateway.console")


def _ago(value: datetime | None) -> str:
    """How long ago (``5m ago``), or for a time to come how long until (``in 59m``)."""
    if value is None:
        return "—"
    seconds = (datetime.now(UTC) - value).total_seconds()
    span = _span(abs(seconds))
    return f"in {span}" if seconds < 0 else f"{span} ago"


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else "—"


def _mcp_tools(agent: str, capabilities: Sequence[AgentCapability]) -> dict[str, str]:
    """Each skill's MCP tool name at ``/mcp``."""
    return tool_names(agent, [capability.task_name for capability in capabilities])


templates.env.filters["ago"] = _ago
templates.env.filters["when"] = _when
templates.env.filters["payload"] = payload_html
templates.env.globals["mcp_tools"] = _mcp_tools


def static_files() -> StaticFiles:
    """The console's own assets (htmx, styles, the session view's script): no CDN."""
    return StaticFiles(directory=_HERE / "static")


@asynccontextmanager
async def console_lifespan(state: GatewayState) -> AsyncIterator[None]:
    """Start the console's clients with the gateway; stop them with it."""
    async with console_clients(state.settings) as clients:
        state.console = clients
        try:
            yield
        finally:
            state.console = None


def _page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context, status_code=status_code)


def _error_page(request: Request, status: int, title: str, message: str) -> HTMLResponse:
    user = getattr(request.state, "console_user", None)
    return _page(request, "error.html", status_code=status, user=user, title=title, message=message)


def _problems(exc: ValidationError) -> str:
    """A filter's validation errors, for people."""
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())


OUTAGE_RETRY_SECONDS = 5
"""How often an outage page asks for its page again (and the ``Retry-After`` it sends)."""


def _outage_page(request: Request, what: str, who: str, lead: str, message: str) -> HTMLResponse:
    """503: a dependency of the page is down. The page says which, and shows itself again
    (it asks every few seconds) as soon as the dependency is back."""
    user = getattr(request.state, "console_user", None)
    log.warning("console_dependency_down", path=request.url.path, what=what, error=message)
    response = _page(
        request,
        "outage.html",
        status_code=503,
        user=user,
        what=what,
        who=who,
        lead=lead,
        message=message,
        retry_url=str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""),
        retry_seconds=OUTAGE_RETRY_SECONDS,
    )
    response.headers["Retry-After"] = str(OUTAGE_RETRY_SECONDS)
    return response


def _unavailable(request: Request, exc: ServiceUnavailableError) -> tuple[str, str, str, str]:
    """``(what is down, who said so, the lead, the message)`` of a service call's 503."""
    name = _service_of(request, exc.url)
    details = exc.details if isinstance(exc.details, dict) else {}
    if details.get("dependency") == "database":
        return (
            f"The {name}'s database",
            f"the {name}",
            f"The {name} cannot reach its database right now, so this page cannot be read.",
            exc.message,
        )
    return (
        f"The {name}",
        f"the {name}",
        f"The {name} cannot be reached, or is not ready, right now.",
        exc.message,
    )


def _service_of(request: Request, url: str) -> str:
    """Which service a client call went to (``url`` is the call's)."""
    settings = GatewayState.of(request).settings
    for name, base in (
        ("registry", settings.registry_url),
        ("memory", settings.memory_url),
        ("tracker", settings.tracker_url),
    ):
        if url.startswith(base.rstrip("/")):
            return name
    return "service"


class ConsoleRoute(APIRoute):
    """Console errors as pages: sign-in needed, a service refused or is down."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequired as exc:
                return login_redirect(request, exc)
            except ServiceAuthError as exc:
                if exc.status == 401:
                    return login_redirect(request, LoginRequired(request.url.path, exc.message))
                return _error_page(request, 403, "Not allowed", exc.message)
            except ServiceUnavailableError as exc:
                return _outage_page(request, *_unavailable(request, exc))
            except ServiceError as exc:
                status = exc.status if 400 <= exc.status < 600 else 502
                return _error_page(request, status, f"The service answered {exc.code}", exc.message)
            except DiscoHTTPError as exc:
                if exc.status_code == 503:
                    return _outage_page(
                        request,
                        what="A dependency of the gateway",
                        who="the gateway",
                        lead="The gateway cannot read what this page shows right now.",
                        message=exc.message,
                    )
                return _error_page(request, exc.status_code, exc.code, exc.message)
            except Exception as exc:
                if not database_unavailable(exc):
                    raise
                return _outage_page(
                    request,
                    what="The gateway's database",
                    who="the database",
                    lead="The gateway cannot reach its database right now, so this page "
                    "cannot be read.",
                    message=f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}",
                )

        return handle


router = APIRouter(prefix="/console", include_in_schema=False, route_class=ConsoleRoute)


async def _user(request: Request, user: ConsoleUserDep) -> ConsoleUser:
    request.state.console_user = user
    return user


UserDep = Annotated[ConsoleUser, Depends(_user)]


def _clients(request: Request) -> ConsoleClients:
    return GatewayState.of(request).require_console()


ClientsDep = Annotated[ConsoleClients, Depends(_clients)]


# -- signing in ------------------------------------------------------------------------------


@router.get("/login")
async def login_page(request: Request, next: str | None = None) -> HTMLResponse:
    settings = GatewayState.of(request).settings
    return _page(request, "login.html", next=safe_next(next), dev=settings.is_dev, error=None)


@router.post("/login")
async def login(
    request: Request, token: Annotated[str, Form()], next: Annotated[str, Form()] = "/console"
) -> Response:
    state = GatewayState.of(request)
    try:
        identity = await verify_token(state, token)
    except DiscoHTTPError as exc:
        log.info("console_login_refused", reason=exc.message)
        return _page(
            request,
            "login.html",
            status_code=401,
            next=safe_next(next),
            dev=state.settings.is_dev,
            error=exc.message,
        )
    log.info("console_login", tenant_id=identity.tenant_id, user_id=identity.user_id)
    response = RedirectResponse(safe_next(next), status_code=303)
    response.set_cookie(
        COOKIE,
        token.strip(),
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=not state.settings.is_dev,
    )
    return response


@router.post("/logout")
async def logout() -> Response:
    response = RedirectResponse("/console/login", status_code=303)
    response.delete_cookie(COOKIE, path=COOKIE_PATH)
    return response


@router.get("")
async def home(user: UserDep) -> Response:
    return RedirectResponse("/console/plans", status_code=303)


# -- plans -----------------------------------------------------------------------------------


@router.get("/plans")
async def plans(
    request: Request,
    user: UserDep,
    clients: ClientsDep,
    status: str = "",
    plan_type: str = "",
    agent_name: str = "",
    session_id: str = "",
    root_only: str = "",
    cursor: str = "",
) -> HTMLResponse:
    filters = {
        "status": status,
        "plan_type": plan_type,
        "agent_name": agent_name,
        "session_id": session_id,
        "root_only": root_only,
        "cursor": cursor,
    }
    given = {key: value.strip() for key, value in filters.items() if value.strip()}
    partial = request.headers.get("HX-Request") == "true"
    template = "_plans_table.html" if partial else "plans.html"
    try:
        query = PlanProgressQuery.model_validate({**given, "limit": 50})
    except ValidationError as exc:
        problems = _problems(exc)
        return _page(
            request,
            template,
            status_code=400,
            user=user,
            page=None,
            filters=filters,
            statuses=list(PlanStatus),
            error=f"Invalid filter: {problems}",
        )
    plans = await service.list_plans(clients, user, query)
    return _page(
        request,
        template,
        user=user,
        page=plans.page,
        planners_down=plans.planners_down,
        filters=filters,
        statuses=list(PlanStatus),
        error=None,
    )


@router.get("/plans/{plan_id}")
async def plan(request: Request, plan_id: str, user: UserDep, clients: ClientsDep) -> HTMLResponse:
    detail = await service.plan_detail(clients, user, plan_id)
    if detail is None:
        return _error_page(request, 404, "No such plan", f"No plan {plan_id!r} in your tenant.")
    return _page(request, "plan.html", user=user, detail=detail)


# -- agents ----------------------------------------------------------------------------------


@router.get("/agents")
async def agents(request: Request, user: UserDep, clients: ClientsDep) -> HTMLResponse:
    overview = await service.agents_overview(clients, user)
    return _page(request, "agents.html", user=user, overview=overview)


# -- bus -------------------------------------------------------------------------------------


@router.get("/bus")
async def bus(
    request: Request,
    user: UserDep,
    clients: ClientsDep,
    agent: str = "",
    event_type: str = "",
) -> HTMLResponse:
    try:
        view = await bus_view(clients, user, agent=agent.strip(), event_type=event_type.strip())
    except ValidationError as exc:
        problems = _problems(exc)
        return _error_page(request, 400, "Invalid filter", problems)
    return _page(request, "bus.html", user=user, bus=view)


@router.get("/bus/asyncapi.{extension}")
async def bus_document(
    request: Request, extension: str, user: UserDep, clients: ClientsDep
) -> Response:
    forms = {"json": AsyncApiFormat.JSON, "yaml": AsyncApiFormat.YAML}
    if extension not in forms:
        return _error_page(request, 404, "No such document", "Ask for asyncapi.json or .yaml.")
    fetched = await bus_download(clients, user, forms[extension])
    filename = f"asyncapi-{user.tenant_id}.{extension}"
    return Response(
        fetched.content,
        media_type=fetched.media_type,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


# -- sessions --------------------------------------------------------------------------------


@router.get("/sessions")
async def sessions(
    request: Request, user: UserDep, clients: ClientsDep, session_id: str = ""
) -> Response:
    if session_id.strip():
        return RedirectResponse(f"/console/sessions/{session_id.strip()}", status_code=303)
    overview = await service.sessions_overview(clients, user)
    return _page(request, "sessions.html", user=user, overview=overview)


@router.get("/sessions/{session_id}")
async def session(request: Request, session_id: str, user: UserDep) -> HTMLResponse:
    return _page(request, "session.html", user=user, session_id=session_id)


# -- dead letters ----------------------------------------------------------------------------


@router.get("/dlq")
async def dead_letters(request: Request, user: UserDep) -> HTMLResponse:
    state = GatewayState.of(request)
    letters = await read_dead_letters(
        state.require_bus().settings, user, limit=state.settings.console_dlq_limit
    )
    return _page(request, "dlq.html", user=user, letters=letters, republished=None)


@router.post("/dlq/republish")
async def republish_dead_letter(
    request: Request,
    user: UserDep,
    topic: Annotated[str, Form()],
    partition: Annotated[int, Form()],
    offset: Annotated[int, Form()],
) -> HTMLResponse:
    state = GatewayState.of(request)
    bus = state.require_bus()
    letter = await republish(
        bus,
        user,
        topic=topic,
        partition=partition,
        offset=offset,
        limit=state.settings.console_dlq_limit,
    )
    letters = await read_dead_letters(bus.settings, user, limit=state.settings.console_dlq_limit)
    return _page(request, "dlq.html", user=user, letters=letters, republished=letter)


# -- push notifications ----------------------------------------------------------------------


@router.get("/pushes")
async def pushes(request: Request, user: UserDep) -> HTMLResponse:
    waiting = await service.waiting_pushes(GatewayState.of(request), user)
    return _page(request, "pushes.html", user=user, waiting=waiting)


# -- health ----------------------------------------------------------------------------------


@router.get("/health")
async def health(
    request: Request,
    user: UserDep,
    clients: ClientsDep,
    fragment: Annotated[bool, Query()] = False,
) -> HTMLResponse:
    services = await service.health(GatewayState.of(request), clients)
    template = "_health.html" if fragment else "health.html"
    return _page(request, template, user=user, services=services)
