"""Who an A2A call acts for, carried through the a2a-sdk's call context.

The a2a-sdk hands every store and stream call a ``ServerCallContext``; the
gateway puts a :class:`CallScope` in its state (the caller's identity from the
token, the agent of the endpoint). The store reads the tenant and user from it,
never from the request. The a2a-sdk's event stream is not handed a context, so
the scope of the running call is also kept in a context variable
(:func:`current_scope`): set where a call starts (the endpoint, the applier),
inherited by every task the a2a-sdk starts for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from a2a.auth.user import User
from a2a.server.context import ServerCallContext

from disco_common.auth import Role
from disco_gateway.tasks.repository import TaskFilter
from disco_service import Identity

__all__ = ["CallScope", "DiscoUser", "current_scope", "scoped", "system_identity"]

_STATE_KEY = "disco.scope"
_CURRENT: ContextVar[CallScope | None] = ContextVar("disco_gateway_scope", default=None)

SYSTEM_SUB = "disco-gateway"


def system_identity(tenant_id: str, user_id: str = SYSTEM_SUB) -> Identity:
    """The identity the gateway's own jobs act with for ``tenant_id`` (sees every user's tasks)."""
    return Identity(tenant_id, user_id, SYSTEM_SUB, frozenset({Role.SERVICE}))


@dataclass(frozen=True)
class CallScope:
    """What an A2A call may touch.

    Attributes:
        identity: the caller (from the token; for a public agent without a token,
            the configured public tenant and user).
        agent: the agent of the endpoint called (``/a2a/{agent}``), or None at
            the gateway's own endpoint (``/a2a``).
        anonymous: the caller sent no token (a public agent).
        system: the gateway's own job (the applier): every user's tasks.
    """

    identity: Identity
    agent: str | None = None
    anonymous: bool = False
    system: bool = False

    @property
    def tenant_id(self) -> str:
        return self.identity.tenant_id

    @property
    def user_id(self) -> str:
        return self.identity.user_id

    def where(self) -> TaskFilter:
        """The tasks this call may see: the endpoint's agent's, the caller's own."""
        return TaskFilter(agent=self.agent, owner=None if self.system else self.user_id)

    def attach(self, context: ServerCallContext) -> ServerCallContext:
        """Put this scope in the a2a-sdk's call context (and its user)."""
        context.state[_STATE_KEY] = self
        context.user = DiscoUser(self)
        return context

    def context(self) -> ServerCallContext:
        """A call context of this scope (for the gateway's own calls into the store)."""
        return self.attach(ServerCallContext())

    @classmethod
    def of(cls, context: ServerCallContext | None) -> CallScope:
        """The scope of ``context`` (else of the running call).

        Raises:
            RuntimeError: no scope: a call the gateway did not authenticate.
        """
        scope = context.state.get(_STATE_KEY) if context is not None else None
        if isinstance(scope, CallScope):
            return scope
        current = _CURRENT.get()
        if current is None:
            raise RuntimeError("an A2A call without a scope: it was not authenticated")
        return current


class DiscoUser(User):
    """The a2a-sdk's view of the caller."""

    def __init__(self, scope: CallScope) -> None:
        self.scope = scope

    @property
    def is_authenticated(self) -> bool:
        return not self.scope.anonymous

    @property
    def user_name(self) -> str:
        return self.scope.user_id


def current_scope() -> CallScope:
    """The scope of the running call.

    Raises:
        RuntimeError: outside a call the gateway authenticated.
    """
    return CallScope.of(None)


@contextmanager
def scoped(scope: CallScope) -> Iterator[CallScope]:
    """Run the block (and the tasks it starts) as ``scope``."""
    token = _CURRENT.set(scope)
    try:
        yield scope
    finally:
        _CURRENT.reset(token)


def enter(scope: CallScope) -> None:
    """Make ``scope`` the running call's for the rest of the current task (an endpoint)."""
    _CURRENT.set(scope)
