"""A2A agent cards: the card objects, and the one builder the registry and the gateway share.

An agent's registration (its capabilities with their schemas resolved) becomes
an A2A v1.0 :class:`A2AAgentCard` whose interfaces are the
gateway's public URL (``DISCO_GATEWAY_PUBLIC_URL``): pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, JsonValue

from disco_common._base import Wire
from disco_common.a2a import A2A_PROTOCOL_VERSION
from disco_common.ids import UtcDatetime
from disco_common.registry import DiscoveredCapability, Visibility

__all__ = [
    "A2A_BEARER_SCHEME",
    "A2A_EVENT_CONTRACTS_EXTENSION",
    "A2A_GRPC_BINDING",
    "A2A_HTTP_JSON_BINDING",
    "A2A_JSONRPC_BINDING",
    "A2AAgentCapabilities",
    "A2AAgentCard",
    "A2AAgentCardSignature",
    "A2AAgentExtension",
    "A2AAgentInterface",
    "A2AAgentProvider",
    "A2AAgentSkill",
    "A2ACardSource",
    "A2AHTTPAuthSecurityScheme",
    "A2ASecurityRequirement",
    "A2ASecurityScheme",
    "A2AStringList",
    "agent_a2a_url",
    "build_agent_card",
    "build_gateway_card",
]

A2A_JSONRPC_BINDING = "JSONRPC"
"""The JSON-RPC 2.0 protocol binding's name in ``supportedInterfaces``."""

A2A_HTTP_JSON_BINDING = "HTTP+JSON"
"""The HTTP+JSON (REST) protocol binding's name in ``supportedInterfaces``."""

A2A_GRPC_BINDING = "GRPC"
"""The gRPC protocol binding's name in ``supportedInterfaces``."""

A2A_EVENT_CONTRACTS_EXTENSION = "urn:disco:a2a:extension:event-contracts:v1"
"""The A2A extension under which a card carries each skill's input and output JSON Schemas.

A2A v1.0 skills have no schema slot: ``capabilities.extensions[].params.skills.<skill id>``
holds ``{"request": <event definition>, "responses": [<event definitions>]}``,
each with its ``json_schema``. Clients that do not know the extension ignore it.
"""

A2A_BEARER_SCHEME = "bearer"
"""The name of the bearer-token security scheme in cards."""


# -- the card objects ------------------------------------------------------------


class A2AAgentInterface(Wire):
    """Where and how to reach an agent: a URL, a protocol binding, a protocol version."""

    url: str
    protocol_binding: str
    protocol_version: str = A2A_PROTOCOL_VERSION
    tenant: str | None = None


class A2AAgentProvider(Wire):
    """Who runs the agent."""

    organization: str
    url: str


class A2AAgentExtension(Wire):
    """A protocol extension the agent supports."""

    uri: str
    description: str | None = None
    required: bool | None = None
    params: dict[str, JsonValue] | None = None


class A2AAgentCapabilities(Wire):
    """Optional protocol features the agent supports."""

    streaming: bool | None = None
    push_notifications: bool | None = None
    extensions: list[A2AAgentExtension] | None = None
    extended_agent_card: bool | None = None


class A2AHTTPAuthSecurityScheme(Wire):
    """HTTP authentication (``Authorization: Bearer <JWT>`` for disco)."""

    scheme: str
    bearer_format: str | None = None
    description: str | None = None


class A2ASecurityScheme(Wire):
    """A security scheme (disco uses the HTTP bearer one)."""

    http_auth_security_scheme: A2AHTTPAuthSecurityScheme | None = None


class A2AStringList(Wire):
    """A list of strings (the scopes of a security requirement)."""

    list_: list[str] = Field(
        default_factory=list, alias="list", validation_alias=AliasChoices("list", "list_")
    )


class A2ASecurityRequirement(Wire):
    """Schemes a caller must satisfy together (scheme name → scopes)."""

    schemes: dict[str, A2AStringList] = Field(default_factory=dict)


class A2AAgentSkill(Wire):
    """Something the agent can do (a disco capability)."""

    id: str
    name: str
    description: str
    tags: list[str] = Field(default_factory=list)
    examples: list[str] | None = None
    input_modes: list[str] | None = None
    output_modes: list[str] | None = None
    security_requirements: list[A2ASecurityRequirement] | None = None


class A2AAgentCardSignature(Wire):
    """A JWS signature of a card (RFC 7515, detached): its protected header and signature,
    base64url, over the card's RFC 8785 canonical JSON without ``signatures``."""

    protected: str
    signature: str
    header: dict[str, JsonValue] | None = None


class A2AAgentCard(Wire):
    """An A2A v1.0 AgentCard."""

    name: str
    description: str
    version: str
    supported_interfaces: list[A2AAgentInterface] = Field(min_length=1)
    capabilities: A2AAgentCapabilities
    default_input_modes: list[str]
    default_output_modes: list[str]
    skills: list[A2AAgentSkill] = Field(default_factory=list)
    provider: A2AAgentProvider | None = None
    documentation_url: str | None = None
    security_schemes: dict[str, A2ASecurityScheme] | None = None
    security_requirements: list[A2ASecurityRequirement] | None = None
    signatures: list[A2AAgentCardSignature] | None = None
    icon_url: str | None = None


# -- building cards ------------------------------------------------------------


class A2ACardSource(BaseModel):
    """What a card is built from: an agent's registration with its schemas resolved."""

    model_config = ConfigDict(extra="ignore")

    name: str
    description: str = ""
    version: str = "0.1.0"
    tags: list[str] = Field(default_factory=list)
    visibility: Visibility = Visibility.TENANT
    tenant_id: str = Field(description="The tenant that registered the agent (the provider).")
    capabilities: list[DiscoveredCapability] = Field(default_factory=list)
    updated_at: UtcDatetime | None = Field(
        default=None,
        description="When the registration last changed (a card's Last-Modified); not on the card.",
    )


_JSON = "application/json"
_TEXT = "text/plain"


def agent_a2a_url(public_url: str, name: str) -> str:
    """The A2A endpoint of agent ``name`` at the gateway whose public URL is ``public_url``."""
    return f"{public_url.rstrip('/')}/a2a/{name}"


def _interfaces(
    url: str, tenant: str | None, grpc_address: str | None, route: str | None
) -> list[A2AAgentInterface]:
    """JSON-RPC and HTTP+JSON at ``url``; gRPC at ``grpc_address`` when given, whose
    ``tenant`` field is the agent's ``route`` (one gRPC service serves every agent)."""
    interfaces = [
        A2AAgentInterface(url=url, protocol_binding=binding, tenant=tenant)
        for binding in (A2A_JSONRPC_BINDING, A2A_HTTP_JSON_BINDING)
    ]
    if grpc_address:
        interfaces.append(
            A2AAgentInterface(url=grpc_address, protocol_binding=A2A_GRPC_BINDING, tenant=route)
        )
    return interfaces


def _security(requires_token: bool) -> dict[str, Any]:
    schemes = {
        A2A_BEARER_SCHEME: A2ASecurityScheme(
            http_auth_security_scheme=A2AHTTPAuthSecurityScheme(
                scheme="Bearer",
                bearer_format="JWT",
                description=("A disco bearer token (`disco token`); tenant and user come from it."),
            )
        )
    }
    return {
        "security_schemes": schemes,
        "security_requirements": (
            [A2ASecurityRequirement(schemes={A2A_BEARER_SCHEME: A2AStringList()})]
            if requires_token
            else None
        ),
    }


def _skills(source: A2ACardSource, *, prefix: str = "") -> list[A2AAgentSkill]:
    return [
        A2AAgentSkill(
            id=f"{prefix}{capability.task_name}",
            name=f"{prefix}{capability.task_name}",
            description=capability.description or f"{source.name}: {capability.task_name}",
            tags=[*source.tags, capability.consumed_event.event_type],
            input_modes=[_JSON, _TEXT],
            output_modes=[_JSON, _TEXT],
        )
        for capability in source.capabilities
    ]


def _contracts(sources: Iterable[A2ACardSource], *, prefixed: bool) -> dict[str, JsonValue]:
    skills: dict[str, JsonValue] = {}
    for source in sources:
        for capability in source.capabilities:
            key = f"{source.name}/{capability.task_name}" if prefixed else capability.task_name
            skills[key] = {
                "request": capability.consumed_event.model_dump(mode="json", exclude_none=True),
                "responses": [
                    event.model_dump(mode="json", exclude_none=True)
                    for event in capability.produced_events
                ],
            }
    return {"skills": skills}


def _contracts_extension(params: dict[str, JsonValue]) -> A2AAgentExtension:
    return A2AAgentExtension(
        uri=A2A_EVENT_CONTRACTS_EXTENSION,
        description=(
            "disco event contracts: for each skill, the request event (type, topic, JSON "
            "Schema of the input) and the response events (JSON Schemas of the output)"
        ),
        params=params,  # not required: clients that do not know it ignore it
    )


def build_agent_card(
    source: A2ACardSource,
    *,
    public_url: str,
    requires_token: bool = True,
    tenant: str | None = None,
    grpc_address: str | None = None,
    streaming: bool = True,
    push_notifications: bool = True,
) -> A2AAgentCard:
    """The A2A card of one agent, reached through the gateway.

    - name, description, version from the registration; the registering tenant
      is the provider;
    - ``supportedInterfaces``: JSON-RPC and HTTP+JSON at
      ``{public_url}/a2a/{name}``, protocol 1.0 (with ``tenant`` when given: the
      ``/{tenant}/…`` path binding); gRPC at ``grpc_address`` (``host:port``) when
      given, with the agent's name as its ``tenant`` (the field a gRPC call is
      routed by: the caller's tenant comes from its token on every binding);
    - each capability becomes a skill (id and name = the task name; tags = the
      agent's tags and the request event type; JSON and text in and out); the
      skills' input and output JSON Schemas travel in the
      :data:`A2A_EVENT_CONTRACTS_EXTENSION` extension;
    - the bearer security scheme, required unless ``requires_token`` is false
      (an agent outside callers may use without a token).
    """
    base = public_url.rstrip("/")
    return A2AAgentCard(
        name=source.name,
        description=source.description or f"disco agent {source.name}",
        version=source.version,
        supported_interfaces=_interfaces(
            agent_a2a_url(base, source.name), tenant, grpc_address, source.name
        ),
        provider=A2AAgentProvider(organization=source.tenant_id, url=base),
        capabilities=A2AAgentCapabilities(
            streaming=streaming,
            push_notifications=push_notifications,
            extended_agent_card=True,
            extensions=[_contracts_extension(_contracts([source], prefixed=False))],
        ),
        default_input_modes=[_JSON, _TEXT],
        default_output_modes=[_JSON, _TEXT],
        skills=_skills(source),
        **_security(requires_token),
    )


def build_gateway_card(
    sources: Sequence[A2ACardSource],
    *,
    public_url: str,
    name: str = "disco",
    description: str | None = None,
    version: str = "0.1.0",
    tenant: str | None = None,
    grpc_address: str | None = None,
    streaming: bool = True,
    push_notifications: bool = True,
) -> A2AAgentCard:
    """The gateway's own card: every agent in ``sources`` as skills ``<agent>/<task name>``.

    Its interfaces are ``{public_url}/a2a`` (and gRPC at ``grpc_address``, with no
    ``tenant``); a message sent there names its
    agent and skill in its metadata (``{"skill": "<agent>/<task name>"}``).
    Each agent also has a card of its own (:func:`build_agent_card`).
    """
    base = public_url.rstrip("/")
    agents = ", ".join(source.name for source in sources) or "none yet"
    return A2AAgentCard(
        name=name,
        description=description
        or (
            "disco's A2A gateway: the agents of this disco platform, each also at "
            f"{base}/a2a/<agent> with its own card. Agents: {agents}."
        ),
        version=version,
        supported_interfaces=_interfaces(f"{base}/a2a", tenant, grpc_address, None),
        provider=A2AAgentProvider(organization="disco", url=base),
        capabilities=A2AAgentCapabilities(
            streaming=streaming,
            push_notifications=push_notifications,
            extended_agent_card=True,
            extensions=[_contracts_extension(_contracts(sources, prefixed=True))],
        ),
        default_input_modes=[_JSON, _TEXT],
        default_output_modes=[_JSON, _TEXT],
        skills=[skill for source in sources for skill in _skills(source, prefix=f"{source.name}/")],
        **_security(True),
    )
