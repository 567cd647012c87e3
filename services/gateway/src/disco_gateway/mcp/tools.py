"""An agent skill as an MCP tool: its name, its schemas, its arguments and its answer.

**Tool names.** A skill ``<skill>`` of agent ``<agent>`` is the tool
``<agent>__<skill>`` (two underscores), with every ``:`` and ``/`` of the skill
written ``.``: ``gw-math`` / ``add`` is ``gw-math__add``, ``billing`` /
``invoice:create`` is ``billing__invoice.create``. Agent names keep to
``[A-Za-z0-9._-]`` and skill names have no ``_``, so the last ``__`` of a tool
name always splits it back into its agent and skill, and every name fits MCP's
``[A-Za-z0-9._-]{1,128}``. Two rare cases add ``-`` and eight hex digits of a
hash of ``<agent>/<skill>`` to the name: a name that would pass 128 characters
(its skill part is cut), and two skills of one agent that would get the same
name (``a:b`` and ``a/b``). A name is the same on every gateway instance and
stays as long as the agent keeps the skill.

**Schemas.** ``inputSchema`` is the request schema the skill registered; a
request that is not a JSON object (MCP arguments always are) is the argument
``input`` (``{"input": <request>}``). ``outputSchema`` is the registered
schema of the answer's ``result``, with a result that is not an object as
``{"result": <result>}``; a skill whose answer has no schema has no
``outputSchema``. ``_meta`` names the agent, the skill, the agent's version and
the request's event type (``disco/agent``, ``disco/skill``, ``disco/version``,
``disco/event``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import JsonValue

from disco.a2a import A2AGatewayHelper, A2AMappingError
from disco_common.a2a_cards import A2ACardSource
from disco_common.registry import DiscoveredCapability, validate_payload
from disco_common.topics import Topic

__all__ = ["ToolEntry", "agent_of", "entries_of", "tool_name", "tool_names"]

SEPARATOR = "__"
_MAX = 128
_HASHED = 9  # "-" and eight hex digits
_INPUT = "input"
_RESULT = "result"


def _hash(agent: str, skill: str) -> str:
    return hashlib.sha256(f"{agent}/{skill}".encode()).hexdigest()[:8]


def _plain(agent: str, skill: str) -> str:
    return f"{agent}{SEPARATOR}{skill.replace(':', '.').replace('/', '.')}"


def _hashed(agent: str, skill: str) -> str:
    plain = _plain(agent, skill)
    keep = _MAX - len(agent) - len(SEPARATOR) - _HASHED
    skill_part = plain[len(agent) + len(SEPARATOR) :][:keep]
    return f"{agent}{SEPARATOR}{skill_part}-{_hash(agent, skill)}"


def tool_name(agent: str, skill: str) -> str:
    """The MCP tool name of ``agent``'s skill ``skill`` alone (see the module docs);
    :func:`tool_names` names all of an agent's skills, telling apart colliding ones."""
    plain = _plain(agent, skill)
    return plain if len(plain) <= _MAX else _hashed(agent, skill)


def tool_names(agent: str, skills: list[str]) -> dict[str, str]:
    """The tool name of each of ``agent``'s ``skills`` (skill → name)."""
    names: dict[str, str] = {}
    taken: dict[str, int] = {}
    for skill in skills:
        name = tool_name(agent, skill)
        taken[name] = taken.get(name, 0) + 1
        names[skill] = name
    for skill, name in names.items():
        if taken[name] > 1:
            names[skill] = _hashed(agent, skill)
    return names


def agent_of(name: str) -> str | None:
    """The agent a tool name belongs to (None: not a name this gateway gives)."""
    agent, separator, _ = name.rpartition(SEPARATOR)
    return agent if separator and agent else None


def _is_object(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` is an object's (a root ``$ref`` to its own ``$defs`` followed)."""
    reference = schema.get("$ref")
    defs = schema.get("$defs")
    if isinstance(reference, str) and reference.startswith("#/$defs/") and isinstance(defs, dict):
        target = defs.get(reference.removeprefix("#/$defs/"))
        return isinstance(target, dict) and _is_object({**target, "$defs": defs})
    kind = schema.get("type")
    return kind == "object" or (kind is None and "properties" in schema)


def _wrapped(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """``{"<name>": schema}`` as an object schema (``$defs`` stay at the root, for ``$ref`` s)."""
    inner = {key: value for key, value in schema.items() if key != "$defs"}
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {name: inner},
        "required": [name],
    }
    if "$defs" in schema:
        wrapper["$defs"] = schema["$defs"]
    return wrapper


def _answer_schema(capability: DiscoveredCapability) -> dict[str, Any] | None:
    """The registered schema of the answer's ``result`` (with the answer's ``$defs``)."""
    for event in capability.produced_events:
        schema = event.json_schema
        if event.topic != Topic.ACTION_RESULTS.value or not isinstance(schema, dict):
            continue
        properties = schema.get("properties")
        result = properties.get(_RESULT) if isinstance(properties, dict) else None
        if not isinstance(result, dict) or not result:
            continue
        found: dict[str, Any] = dict(result)
        defs = schema.get("$defs")
        if isinstance(defs, dict) and defs:
            found["$defs"] = {**defs, **found.get("$defs", {})}
        return found
    return None


@dataclass(frozen=True)
class ToolEntry:
    """One skill of one agent as a tool.

    Attributes:
        tool: the MCP tool (what ``tools/list`` shows).
        source: the agent, as the caller's tenant sees it.
        capability: the skill.
        wraps_input: the request is the argument ``input``.
        wraps_output: the result is ``{"result": ...}`` in ``structuredContent``.
    """

    tool: types.Tool
    source: A2ACardSource
    capability: DiscoveredCapability
    wraps_input: bool
    wraps_output: bool

    @property
    def name(self) -> str:
        return self.tool.name

    def payload(self, arguments: dict[str, Any] | None) -> JsonValue:
        """The request payload of a call with ``arguments``, checked against the request
        schema.

        Raises:
            A2AMappingError: the arguments break the schema (every violation listed).
        """
        arguments = arguments or {}
        if not self.wraps_input:
            payload: JsonValue = arguments
            A2AGatewayHelper.check_payload(self.capability, payload)
            return payload
        if _INPUT not in arguments:
            raise A2AMappingError(f"'{_INPUT}' is a required property", field=_INPUT)
        payload = arguments[_INPUT]
        try:
            A2AGatewayHelper.check_payload(self.capability, payload)
        except A2AMappingError as exc:
            violations = [
                {**violation, "field": f"{_INPUT}.{violation['field']}".removesuffix(".(payload)")}
                for violation in exc.violations
            ]
            raise A2AMappingError(
                str(exc), field=violations[0]["field"], violations=violations
            ) from None
        return payload

    def structured(self, result: JsonValue) -> dict[str, JsonValue]:
        """The answer's ``result`` as ``structuredContent`` (an object)."""
        if not self.wraps_output and isinstance(result, dict):
            return result
        return {_RESULT: result}

    def misfit(self, structured: dict[str, JsonValue]) -> str | None:
        """Why ``structured`` breaks the tool's ``outputSchema`` (None: it fits, or there
        is none): an agent's answer that does not follow its own schema."""
        schema = self.tool.output_schema
        if schema is None:
            return None
        checked = validate_payload(schema, structured)
        if checked.valid:
            return None
        first = checked.violations[0]
        return f"{first.path or '(result)'}: {first.message}"


def entries_of(source: A2ACardSource) -> list[ToolEntry]:
    """The tools of an agent, one per skill."""
    names = tool_names(source.name, [c.task_name for c in source.capabilities])
    entries: list[ToolEntry] = []
    for capability in source.capabilities:
        request = capability.consumed_event.json_schema
        wraps_input = False
        if request is None:
            input_schema: dict[str, Any] = {"type": "object"}
        elif _is_object(request):
            input_schema = {**request, "type": "object"}
        else:
            input_schema, wraps_input = _wrapped(_INPUT, request), True
        answer = _answer_schema(capability)
        wraps_output = answer is not None and not _is_object(answer)
        output_schema = None
        if answer is not None:
            output_schema = (
                _wrapped(_RESULT, answer) if wraps_output else {**answer, "type": "object"}
            )
        tool = types.Tool(
            name=names[capability.task_name],
            title=f"{source.name}: {capability.task_name}",
            description=capability.description or source.description or None,
            input_schema=input_schema,
            output_schema=output_schema,
            meta={
                "disco/agent": source.name,
                "disco/skill": capability.task_name,
                "disco/version": source.version,
                "disco/event": capability.consumed_event.event_type,
            },
        )
        entries.append(ToolEntry(tool, source, capability, wraps_input, wraps_output))
    return entries
