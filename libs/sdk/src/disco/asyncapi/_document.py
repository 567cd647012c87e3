"""Reading a bus's AsyncAPI document as disco writes it: topics, messages with their
payload schemas, and who sends and receives each.

Works on any document the registry wrote (``GET /v1/asyncapi``), saved or live;
references are followed inside the document only (the registry writes no other).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from disco_common.asyncapi import AsyncApiExtension

__all__ = ["BusAgent", "BusDocument", "BusMessage", "BusTopic", "SchemaRow"]

_MAX_DEPTH = 8


@dataclass
class BusMessage:
    """One event type on the bus.

    Attributes:
        event_type: its CloudEvents ``type``.
        summary: what it means, as registered.
        topics: the topics (without prefix) it travels on.
        payload: its payload schema as the document holds it (references inside
            point into the document: read it with :meth:`BusDocument.resolve`), or
            None when nobody registered one.
        schema: where the schema comes from (``$id``, ``version``, ``source``...).
        examples: example payloads that fit the schema.
        senders, receivers: the agent names that send and receive it (answers
            count as sent by the responder and received by the requester).
    """

    key: str
    event_type: str
    summary: str
    topics: list[str]
    payload: dict[str, Any] | None
    schema: dict[str, Any]
    examples: list[Any]
    senders: list[str] = field(default_factory=list)
    receivers: list[str] = field(default_factory=list)

    @property
    def schema_label(self) -> str:
        """``name@version`` for a registered schema, else the source and its version."""
        if not self.schema:
            return "no schema"
        if self.schema.get("name"):
            return f"{self.schema['name']}@{self.schema.get('version', '?')}"
        return f"{self.schema.get('source', 'schema')} {self.schema.get('version', '')}".strip()


@dataclass
class BusTopic:
    """A channel: a topic (or its dead letters) and its messages' event types."""

    name: str
    address: str
    description: str
    event_types: list[str]
    dead_letters_of: str | None


@dataclass
class BusAgent:
    """An agent (name and version) with what it receives and sends."""

    name: str
    version: str
    description: str
    visibility: str
    tenant: str
    receives: list[str] = field(default_factory=list)
    sends: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SchemaRow:
    """One field of a payload schema, for people.

    Attributes:
        path: the field's path (``to.city``, ``lines[].sku``).
        type: its type in words (``string``, ``integer | null``, ``array of Line``).
        required: whether its object requires it.
        description: its description.
        rules: its constraints in words (``>= 0``, ``one of a, b``, ``default 1``).
    """

    path: str
    type: str
    required: bool
    description: str
    rules: str
    depth: int


def _add(names: list[str], name: str) -> None:
    if name not in names:
        names.append(name)


class BusDocument:
    """A disco AsyncAPI document, read (see the module docstring)."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.raw = document
        info = document.get("info", {})
        self.title: str = info.get("title", "")
        self.tenant: str | None = info.get(AsyncApiExtension.TENANT.value)
        self.topic_prefix: str = info.get(AsyncApiExtension.TOPIC_PREFIX.value, "")
        narrowed = info.get(AsyncApiExtension.FILTER.value) or {}
        self.agent_filter: str | None = narrowed.get("agent")
        self.event_type_filter: str | None = narrowed.get("event_type")
        self.servers: list[str] = [
            str(server.get("host", "")) for server in document.get("servers", {}).values()
        ]
        components = document.get("components", {})
        self.messages: dict[str, BusMessage] = {}
        by_key: dict[str, BusMessage] = {}
        for key, message in components.get("messages", {}).items():
            event_type = message.get(AsyncApiExtension.EVENT_TYPE.value)
            if event_type is None:
                continue  # not an event type of the bus (the dead-letter message)
            read = BusMessage(
                key=key,
                event_type=event_type,
                summary=message.get("summary", ""),
                topics=[],
                payload=self.resolve(message["payload"]) if "payload" in message else None,
                schema=dict(message.get(AsyncApiExtension.SCHEMA.value) or {}),
                examples=[e["payload"] for e in message.get("examples", []) if "payload" in e],
            )
            self.messages[event_type] = read
            by_key[key] = read
        self.topics: list[BusTopic] = []
        for channel in document.get("channels", {}).values():
            keys = [_last(ref) for ref in _refs(channel.get("messages", {}).values())]
            event_types = [by_key[key].event_type for key in keys if key in by_key]
            name = channel.get(AsyncApiExtension.TOPIC.value) or channel.get("title", "")
            self.topics.append(
                BusTopic(
                    name=name,
                    address=channel.get("address", ""),
                    description=channel.get("description", ""),
                    event_types=event_types,
                    dead_letters_of=channel.get(AsyncApiExtension.DEAD_LETTERS_OF.value),
                )
            )
            for event_type in event_types:
                _add(self.messages[event_type].topics, name)
        self.agents: list[BusAgent] = []
        self._read_operations(document.get("operations", {}), by_key)

    def _read_operations(
        self, operations: Mapping[str, Any], by_key: dict[str, BusMessage]
    ) -> None:
        agents: dict[tuple[str, str, str], BusAgent] = {}
        for operation in operations.values():
            about = operation.get(AsyncApiExtension.AGENT.value) or {}
            name = about.get("name")
            if not name:
                continue
            group = (about.get("tenant", ""), name, about.get("version", ""))
            agent = agents.get(group)
            if agent is None:
                agent = agents[group] = BusAgent(
                    name=name,
                    version=about.get("version", ""),
                    description=about.get("description", ""),
                    visibility=about.get("visibility", ""),
                    tenant=about.get("tenant", ""),
                )
            own = [
                by_key[k] for k in map(_last, _refs(operation.get("messages", []))) if k in by_key
            ]
            answers = [
                by_key[k]
                for k in map(_last, _refs((operation.get("reply") or {}).get("messages", [])))
                if k in by_key
            ]
            receiving = operation.get("action") == "receive"
            for message in own:
                _add(message.receivers if receiving else message.senders, name)
                _add(agent.receives if receiving else agent.sends, message.event_type)
            for message in answers:  # a responder sends its answers, a requester gets them
                _add(message.senders if receiving else message.receivers, name)
                _add(agent.sends if receiving else agent.receives, message.event_type)
        self.agents = list(agents.values())

    def resolve(self, node: Any, *, seen: frozenset[str] = frozenset()) -> Any:
        """``node`` with a top-level ``$ref`` followed (inside the document), repeatedly.

        Raises:
            ValueError: the reference points outside the document, nowhere, or in a circle.
        """
        while isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen:
                raise ValueError(f"circular reference {ref}")
            seen = seen | {ref}
            node = self.pointer(ref)
        return node

    def pointer(self, ref: str) -> Any:
        """What the local reference ``ref`` (``#/...``) points at.

        Raises:
            ValueError: ``ref`` is not local or points nowhere.
        """
        if not ref.startswith("#"):
            raise ValueError(f"reference {ref!r} points outside the document")
        node: Any = self.raw
        for part in ref[1:].split("/")[1:]:
            token = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise ValueError(f"reference {ref!r} points nowhere")
        return node

    def schema_rows(self, schema: Any) -> list[SchemaRow]:
        """The fields of ``schema`` (a payload), nested ones under their parent, for a table."""
        rows: list[SchemaRow] = []
        self._rows(schema, "", rows, depth=0, seen=frozenset())
        return rows

    def _rows(
        self, schema: Any, prefix: str, rows: list[SchemaRow], *, depth: int, seen: frozenset[str]
    ) -> None:
        if depth > _MAX_DEPTH or not isinstance(schema, Mapping):
            return
        ref = schema.get("$ref")
        if isinstance(ref, str):
            if ref in seen:
                return  # a recursive model: its fields are listed above
            seen = seen | {ref}
        schema = self._safe(schema)
        for branch in _branches(schema):
            self._rows(self._safe(branch), prefix, rows, depth=depth, seen=seen)
        required = set(schema.get("required", []))
        for name, prop in (schema.get("properties") or {}).items():
            path = f"{prefix}.{name}" if prefix else name
            resolved = self._safe(prop)
            rows.append(
                SchemaRow(
                    path=path,
                    type=self.type_words(prop),
                    required=name in required,
                    description=str(resolved.get("description", "")),
                    rules=_rules(resolved),
                    depth=depth,
                )
            )
            self._rows(prop, path, rows, depth=depth + 1, seen=seen)
            items = resolved.get("items")
            if isinstance(items, Mapping):
                self._rows(items, f"{path}[]", rows, depth=depth + 1, seen=seen)

    def _safe(self, node: Any) -> Mapping[str, Any]:
        try:
            found = self.resolve(node)
        except ValueError:
            return {}
        return found if isinstance(found, Mapping) else {}

    def type_words(self, schema: Any) -> str:
        """``schema``'s type in words: ``string``, ``integer | null``, ``array of Quote``."""
        if isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
            target = self._safe(schema)
            return str(target.get("title") or _last(schema["$ref"]))
        resolved = self._safe(schema)
        kinds = resolved.get("type")
        words: list[str] = []
        if isinstance(kinds, str):
            words.append(kinds)
        elif isinstance(kinds, list):
            words.extend(str(kind) for kind in kinds)
        for branch in resolved.get("anyOf", []) + resolved.get("oneOf", []):
            words.append(self.type_words(branch))
        if "const" in resolved:
            words.append(f"const {resolved['const']!r}")
        if words == ["array"] and isinstance(resolved.get("items"), Mapping):
            return f"array of {self.type_words(resolved['items'])}"
        return " | ".join(dict.fromkeys(words)) or "any"


def _branches(schema: Mapping[str, Any]) -> list[Any]:
    # allOf parts add fields; anyOf/oneOf alternatives (`Model | None`) list theirs too.
    return [*schema.get("allOf", []), *schema.get("anyOf", []), *schema.get("oneOf", [])]


def _rules(schema: Mapping[str, Any]) -> str:
    rules: list[str] = []
    for key, text in (
        ("minimum", ">= {}"),
        ("exclusiveMinimum", "> {}"),
        ("maximum", "<= {}"),
        ("exclusiveMaximum", "< {}"),
        ("minLength", "at least {} characters"),
        ("maxLength", "at most {} characters"),
        ("minItems", "at least {} items"),
        ("maxItems", "at most {} items"),
        ("pattern", "matches {}"),
        ("format", "format {}"),
        ("multipleOf", "multiple of {}"),
    ):
        if key in schema and not isinstance(schema[key], bool):
            rules.append(text.format(schema[key]))
    if isinstance(schema.get("enum"), list):
        rules.append("one of " + ", ".join(map(str, schema["enum"])))
    if "default" in schema:
        rules.append(f"default {schema['default']!r}")
    return "; ".join(rules)


def _refs(items: Any) -> list[str]:
    return [item["$ref"] for item in items if isinstance(item, Mapping) and "$ref" in item]


def _last(ref: str) -> str:
    return ref.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")
