"""The JSON shape of an A2A v1.0 AgentCard, for OpenAPI and response validation.

The card itself is built with the official ``a2a-sdk`` protobuf types and
rendered with protobuf's JSON mapping (camelCase); this model mirrors the
fields disco fills so that the OpenAPI document shows a real schema. Unknown
fields pass through (the A2A card may grow).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = [
    "A2AAgentCapabilities",
    "A2AAgentCard",
    "A2AAgentExtension",
    "A2AAgentInterface",
    "A2AAgentProvider",
    "A2AAgentSkill",
]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class A2AAgentInterface(_Wire):
    """Where and how to reach the agent (through the disco gateway)."""

    url: str
    protocol_binding: str = Field(alias="protocolBinding")
    protocol_version: str = Field(alias="protocolVersion")
    tenant: str | None = None


class A2AAgentProvider(_Wire):
    """Who runs the agent."""

    organization: str
    url: str


class A2AAgentExtension(_Wire):
    """A protocol extension the agent supports."""

    uri: str
    description: str | None = None
    required: bool | None = None
    params: dict[str, JsonValue] | None = None


class A2AAgentCapabilities(_Wire):
    """Optional A2A features."""

    streaming: bool | None = None
    push_notifications: bool | None = Field(default=None, alias="pushNotifications")
    extensions: list[A2AAgentExtension] = Field(default_factory=list)


class A2AAgentSkill(_Wire):
    """One capability, as an A2A skill."""

    id: str
    name: str
    description: str
    tags: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)
    input_modes: list[str] = Field(default_factory=list, alias="inputModes")
    output_modes: list[str] = Field(default_factory=list, alias="outputModes")


class A2AAgentCard(_Wire):
    """An A2A v1.0 AgentCard (camelCase JSON, as the A2A specification renders it)."""

    name: str
    description: str
    version: str
    supported_interfaces: list[A2AAgentInterface] = Field(alias="supportedInterfaces")
    provider: A2AAgentProvider | None = None
    capabilities: A2AAgentCapabilities
    default_input_modes: list[str] = Field(alias="defaultInputModes")
    default_output_modes: list[str] = Field(alias="defaultOutputModes")
    skills: list[A2AAgentSkill] = Field(default_factory=list)
