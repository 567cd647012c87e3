"""Who is signed in to the console: the same bearer JWT as the API, kept in a cookie.

The login page takes a token (``disco token --tenant default --user you`` in
dev) and verifies it with the gateway's own verifier before keeping it in an
``HttpOnly``, ``SameSite=Strict`` cookie scoped to ``/console`` (``Secure``
outside dev). Every page verifies the cookie again; a missing, malformed,
expired or foreign token never reaches a page: the person is sent to the login
page (a redirect, or ``HX-Redirect`` for an htmx request).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated
from urllib.parse import quote

from fastapi import Depends, Request
from fastapi.responses import RedirectResponse, Response

from disco.bus import sign_as
from disco_common.auth import Role
from disco_gateway.state import GatewayState
from disco_service import DiscoHTTPError, Identity

__all__ = [
    "COOKIE",
    "ConsoleUser",
    "ConsoleUserDep",
    "LoginRequired",
    "login_redirect",
    "verify_token",
]

COOKIE = "disco_console_token"
COOKIE_PATH = "/console"
LOGIN_PATH = "/console/login"


@dataclass(frozen=True)
class ConsoleUser:
    """The signed-in person: who the token says, and the token (forwarded to the services)."""

    identity: Identity
    token: str

    @property
    def tenant_id(self) -> str:
        return self.identity.tenant_id

    @property
    def user_id(self) -> str:
        return self.identity.user_id

    @property
    def is_admin(self) -> bool:
        return self.identity.has_role(Role.ADMIN)


class LoginRequired(Exception):
    """No valid token: the person goes to the login page (``next`` brings them back)."""

    def __init__(self, next_path: str, reason: str | None = None) -> None:
        super().__init__(reason or "sign in")
        self.next_path = next_path
        self.reason = reason


async def verify_token(state: GatewayState, token: str) -> Identity:
    """The identity of ``token``.

    Raises:
        DiscoHTTPError: (401) the token is not one the gateway accepts.
    """
    claims = await state.verifier.verify(token.strip())
    # What the person's actions publish is vouched for by their own token.
    sign_as(token.strip())
    # Headers play no part: nobody acts on behalf of anyone in the console.
    return replace(Identity.from_claims(claims, {}), credential=token.strip())


async def _console_user(request: Request) -> ConsoleUser:
    token = request.cookies.get(COOKIE)
    next_path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if not token:
        raise LoginRequired(next_path)
    try:
        identity = await verify_token(GatewayState.of(request), token)
    except DiscoHTTPError as exc:
        raise LoginRequired(next_path, exc.message) from None
    return ConsoleUser(identity=identity, token=token)


ConsoleUserDep = Annotated[ConsoleUser, Depends(_console_user)]
"""The signed-in person of a console page (else the login page)."""


def login_redirect(request: Request, exc: Exception) -> Response:
    """The answer to :class:`LoginRequired`: the login page, and the cookie dropped."""
    next_path = exc.next_path if isinstance(exc, LoginRequired) else "/console"
    target = f"{LOGIN_PATH}?next={quote(next_path, safe='')}"
    response: Response
    if request.headers.get("HX-Request") == "true":
        # htmx swaps the body of a redirect in place; this makes it load the page.
        response = Response(status_code=401, headers={"HX-Redirect": target})
    else:
        response = RedirectResponse(target, status_code=303)
    response.delete_cookie(COOKIE, path=COOKIE_PATH)
    return response


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a console path only (never another site)."""
    if value and value.startswith("/console") and not value.startswith("//"):
        return value
    return "/console"
