"""The AsyncAPI 3.0 document of a tenant's bus, written from its plan.

:func:`build_document` is pure (no I/O): the source in, a JSON-ready ``dict``
out, every mapping in a stable order, so that the same registry state always
gives the same bytes (the ETag is their hash).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from disco_common.asyncapi import ASYNCAPI_VERSION, AsyncApiExtension
from disco_common.system_events import SYSTEM_EVENT_DATA
from disco_registry.asyncapi.envelope import (
    KAFKA_BINDING_VERSION,
    channel,
    dead_letter_channel,
    envelope_components,
    example_headers,
    info_description,
    servers_and_security,
    trait_for,
)
from disco_registry.asyncapi.payloads import (
    DISCO_VERSION,
    document_schema,
    fitting_examples,
    inline_schema_id,
    platform_schema,
    platform_schema_id,
    registered_schema_id,
    type_name,
)
from disco_registry.asyncapi.plan import BusPlan, Keys, PlannedMessage, PlannedOperation, plan_bus
from disco_registry.asyncapi.repository import BusSource, SourceAgent

__all__ = ["DocumentSettings", "build_document"]


@dataclass(frozen=True, slots=True)
class DocumentSettings:
    """What the document says about the deployment: its tenant, topic prefix and Kafka."""

    tenant_id: str
    topic_prefix: str
    bootstrap: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None


class _Schemas:
    """``components.schemas`` for payloads: each registered version once, each inline or
    platform schema under its message."""

    def __init__(self, keys: Keys) -> None:
        self._keys = keys
        self._registered: dict[tuple[str, str], list[tuple[dict[str, Any], str]]] = {}
        self.components: dict[str, Any] = {}

    def registered(self, name: str, version: str, schema: dict[str, Any]) -> str:
        known = self._registered.setdefault((name, version), [])
        for content, key in known:
            if content is schema or content == schema:
                return key
        key = self._keys.take(f"{name}_{version}")
        known.append((schema, key))
        self.components[key] = document_schema(
            schema, key=key, schema_id=registered_schema_id(name, version), title=type_name(name)
        )
        return key

    def own(self, event_type: str, message_key: str, schema: dict[str, Any], schema_id: str) -> str:
        key = self._keys.take(f"{message_key}.payload")
        self.components[key] = document_schema(
            schema, key=key, schema_id=schema_id, title=type_name(event_type)
        )
        return key


class _Writer:
    def __init__(self, source: BusSource, plan: BusPlan, settings: DocumentSettings) -> None:
        self._plan = plan
        self._settings = settings
        self._agents = {(a.tenant_id, a.agent_id): a for a in source.agents}
        self._keys = Keys()
        self._schemas = _Schemas(self._keys)
        if not plan.filtered:
            # The tenant's schema versions are part of its bus even before an agent uses one.
            for schema in source.schemas:
                self._schemas.registered(schema.name, schema.version, schema.json_schema)

    def _owner(self, tenant_id: str, agent_id: str) -> dict[str, str] | None:
        agent = self._agents.get((tenant_id, agent_id))
        return {"agent": agent.name, "version": agent.version} if agent is not None else None

    def message(self, planned: PlannedMessage) -> dict[str, Any]:
        definition = planned.definition
        message: dict[str, Any] = {"name": planned.event_type, "title": planned.event_type}
        description = definition.description if definition is not None else ""
        schema: dict[str, Any] | None = None
        origin: dict[str, Any] | None = None
        if planned.platform is not None:
            schema = platform_schema(planned.platform)
            doc = SYSTEM_EVENT_DATA[planned.platform].__doc__ or ""
            description = description or doc.strip().splitlines()[0].replace("``", "`")
            schema_id = platform_schema_id(planned.event_type)
            key = self._schemas.own(planned.event_type, planned.key, schema, schema_id)
            origin = {"$id": schema_id, "version": DISCO_VERSION, "source": "platform"}
        elif definition is not None and definition.json_schema is not None:
            schema = definition.json_schema
            owner = self._owner(definition.tenant_id, definition.owner_agent_id)
            if definition.schema_name is not None and definition.schema_version is not None:
                key = self._schemas.registered(
                    definition.schema_name, definition.schema_version, schema
                )
                origin = {
                    "$id": registered_schema_id(definition.schema_name, definition.schema_version),
                    "name": definition.schema_name,
                    "version": definition.schema_version,
                    "source": "registered",
                }
            else:
                owner_name = owner["agent"] if owner else definition.owner_agent_id
                owner_version = owner["version"] if owner else "0.0.0"
                schema_id = inline_schema_id(owner_name, owner_version, planned.event_type)
                key = self._schemas.own(planned.event_type, planned.key, schema, schema_id)
                origin = {"$id": schema_id, "version": owner_version, "source": "inline"}
            if owner is not None:
                origin["owner"] = owner
        if description:
            message["summary"] = description
        message["contentType"] = "application/json"
        message["traits"] = [{"$ref": f"#/components/messageTraits/{trait_for(planned.topics)}"}]
        if schema is not None and origin is not None:
            message["payload"] = {"$ref": f"#/components/schemas/{key}"}
            examples = fitting_examples(schema)
            if examples:
                headers = example_headers(planned.event_type, planned.topics)
                message["examples"] = [
                    {"name": f"example-{n}", "headers": headers, "payload": example}
                    for n, example in enumerate(examples, start=1)
                ]
        message[AsyncApiExtension.EVENT_TYPE.value] = planned.event_type
        if origin is not None:
            message[AsyncApiExtension.SCHEMA.value] = origin
        return message

    def operation(self, planned: PlannedOperation) -> dict[str, Any]:
        agent = planned.agent
        verb = "receives" if planned.action == "receive" else "sends"
        operation: dict[str, Any] = {
            "action": planned.action,
            "channel": {"$ref": f"#/channels/{planned.topic}"},
            "title": f"{agent.name} {verb} {planned.event_type}",
        }
        if planned.capability is not None and planned.capability.description:
            operation["summary"] = planned.capability.description
        if agent.description:
            operation["description"] = agent.description
        operation["messages"] = [{"$ref": f"#/channels/{planned.topic}/messages/{planned.message}"}]
        operation["tags"] = [{"name": f"agent:{agent.name}"}]
        if planned.action == "receive":
            group = f"{self._settings.topic_prefix}{agent.name}"
            operation["bindings"] = {
                "kafka": {
                    "groupId": {"type": "string", "enum": [group]},
                    "bindingVersion": KAFKA_BINDING_VERSION,
                }
            }
        if planned.reply is not None:
            reply_topic, keys = planned.reply
            operation["reply"] = {
                "channel": {"$ref": f"#/channels/{reply_topic}"},
                "messages": [{"$ref": f"#/channels/{reply_topic}/messages/{key}"} for key in keys],
            }
        operation[AsyncApiExtension.AGENT.value] = _agent_extension(agent)
        if planned.capability is not None:
            operation[AsyncApiExtension.CAPABILITY.value] = planned.capability.task_name
        return operation

    def document(self, *, agent: str | None, event_type: str | None) -> dict[str, Any]:
        settings, plan = self._settings, self._plan
        messages = {m.key: self.message(m) for m in plan.messages.values()}
        by_topic: dict[str, list[str]] = {topic: [] for topic in plan.topics}
        for planned in plan.messages.values():
            for topic in planned.topics:
                by_topic[topic].append(planned.key)
        channels: dict[str, Any] = {}
        for topic in plan.topics:
            channels[topic] = channel(topic, settings.topic_prefix, by_topic[topic])
        for topic in plan.topics:
            channels[f"{topic}.dlq"] = dead_letter_channel(topic, settings.topic_prefix)
        operations = {op.key: self.operation(op) for op in plan.operations}
        shared = envelope_components(plan.topics)
        servers, security = servers_and_security(
            settings.bootstrap, settings.security_protocol, settings.sasl_mechanism
        )
        info: dict[str, Any] = {
            "title": _title(settings.tenant_id, agent, event_type),
            "version": DISCO_VERSION,
            "description": info_description(settings.tenant_id, settings.topic_prefix),
            AsyncApiExtension.TENANT.value: settings.tenant_id,
            AsyncApiExtension.TOPIC_PREFIX.value: settings.topic_prefix,
        }
        if plan.filtered:
            info[AsyncApiExtension.FILTER.value] = {"agent": agent, "event_type": event_type}
        components: dict[str, Any] = {
            "schemas": {**shared["schemas"], **self._schemas.components},
            "messages": {**messages, **shared["messages"]},
            "messageTraits": shared["messageTraits"],
            "correlationIds": shared["correlationIds"],
        }
        if security:
            components["securitySchemes"] = security
        return {
            "asyncapi": ASYNCAPI_VERSION,
            "id": f"urn:disco:bus:{settings.tenant_id}",
            "info": info,
            "defaultContentType": "application/json",
            "servers": servers,
            "channels": channels,
            "operations": operations,
            "components": components,
        }


def _agent_extension(agent: SourceAgent) -> dict[str, str]:
    return {
        "name": agent.name,
        "version": agent.version,
        "description": agent.description,
        "visibility": agent.visibility,
        "tenant": agent.tenant_id,
    }


def _title(tenant_id: str, agent: str | None, event_type: str | None) -> str:
    title = f"disco bus of tenant {tenant_id}"
    narrowed = [part for part in (agent, event_type) if part is not None]
    return f"{title} ({', '.join(narrowed)})" if narrowed else title


def build_document(
    source: BusSource,
    settings: DocumentSettings,
    *,
    agent: str | None = None,
    event_type: str | None = None,
) -> dict[str, Any]:
    """The AsyncAPI 3.0 document of ``settings.tenant_id``'s bus from ``source``, narrowed
    to ``agent``'s operations and/or ``event_type`` when given.

    Raises:
        AgentNotFound: no live agent called ``agent`` is visible to the tenant.
        EventNotFound: no live agent defines ``event_type``.
    """
    plan = plan_bus(source, tenant_id=settings.tenant_id, agent=agent, event_type=event_type)
    return _Writer(source, plan, settings).document(agent=agent, event_type=event_type)
