"""Prompts and answer parsing for planning with an LLM.

The model answers with JSON only; what it says is validated with the same
contracts as hand-written plans (:class:`PlanDefinition`, :class:`StateAction`),
so a model's mistake becomes a clear error, never a half-built plan.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from disco._completion import ChatMessage, LLMDriver, LLMError
from disco_common.plans import PlanContextData, PlanDefinition, StateAction

__all__ = ["NextStep", "next_step_from_llm", "parse_json_object", "plan_from_llm"]

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)

_PLAN_SYSTEM = """You design plans for a multi-agent system as JSON state machines.
Answer with one JSON object and nothing else, of this form:
{"plan_type": "<name>", "description": "...", "initial_state": "start",
 "states": [{"state_name": "start", "description": "...", "default_next": "<state>"},
            {"state_name": "<state>", "description": "...",
             "action": {"event_type": "<a consumed event of an agent>",
                        "response_event": "<a name you choose, e.g. step.done>",
                        "data": {<payload matching the agent's request schema;
                                  "{goal_data.x}" and "{results.<state>.y}" are filled in>}},
             "transitions": [{"on_event": "<that response_event>", "to_state": "<state>",
                              "condition": "<optional CEL over success, result, goal_data, results>"}]},
            {"state_name": "done", "description": "...", "is_terminal": true},
            {"state_name": "failed", "description": "...", "is_terminal": true, "is_failure": true}]}
Every non-terminal state needs transitions or default_next; send failed answers
(condition "!success") to a failure state. Use only the agents listed."""  # noqa: E501

_STEP_SYSTEM = """You drive one step of a running plan in a multi-agent system.
Given the goal, the results so far and the event that just arrived, answer with
one JSON object and nothing else, one of:
{"kind": "action", "reason": "...", "action": {"event_type": "...", "response_event": "...", "data": {...}}}
{"kind": "finalize", "reason": "...", "result": <the goal's answer>}
{"kind": "fail", "reason": "..."}"""  # noqa: E501


@dataclass(frozen=True, slots=True)
class NextStep:
    """What the LLM decided: another action, the final result, or failure."""

    kind: Literal["action", "finalize", "fail"]
    action: StateAction | None = None
    result: Any = None
    reason: str | None = None


class _StepAnswer(BaseModel):
    kind: Literal["action", "finalize", "fail"]
    reason: str | None = None
    action: StateAction | None = None
    result: Any = None


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's answer (code fences allowed).

    Raises:
        LLMError: the answer holds no JSON object.
    """
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    if not stripped.startswith("{"):
        start, end = stripped.find("{"), stripped.rfind("}")
        if start == -1 or end <= start:
            raise LLMError(f"the model's answer holds no JSON object: {text[:300]!r}")
        stripped = stripped[start : end + 1]
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise LLMError(f"the model's answer is not valid JSON ({exc}): {text[:300]!r}") from None
    if not isinstance(value, dict):
        raise LLMError("the model's answer is JSON but not an object")
    return value


def _agents_text(agents: Sequence[Any]) -> str:
    lines: list[str] = []
    for agent in agents:
        dumped = agent.model_dump(mode="json") if isinstance(agent, BaseModel) else agent
        if not isinstance(dumped, Mapping):
            continue
        for capability in dumped.get("capabilities", []) or []:
            consumed = capability.get("consumed_event") or {}
            lines.append(
                json.dumps(
                    {
                        "agent": dumped.get("name"),
                        "capability": capability.get("task_name"),
                        "description": capability.get("description", ""),
                        "request_event": consumed.get("event_type"),
                        "request_schema": consumed.get("json_schema"),
                    },
                    separators=(",", ":"),
                )
            )
    return "\n".join(lines) or "(no agents were discovered)"


async def plan_from_llm(
    llm: LLMDriver, goal_event: str, goal_data: Any, agents: Sequence[Any], *, attempts: int = 2
) -> PlanDefinition:
    """Ask ``llm`` for a plan achieving the goal with ``agents``; validate it.

    An invalid answer is sent back with the error, up to ``attempts`` tries.

    Raises:
        LLMError: no valid plan after ``attempts`` tries.
    """
    messages: list[ChatMessage] = [
        {"role": "system", "content": _PLAN_SYSTEM},
        {
            "role": "user",
            "content": (
                f"Goal event: {goal_event}\nGoal data: {json.dumps(goal_data, default=str)}\n"
                f"Agents and their capabilities (one JSON per line):\n{_agents_text(agents)}"
            ),
        },
    ]
    problem = ""
    for _ in range(max(1, attempts)):
        completion = await llm.complete(messages, temperature=0, json_mode=True)
        try:
            return PlanDefinition.model_validate(parse_json_object(completion.content))
        except (LLMError, ValidationError, ValueError) as exc:
            problem = str(exc)[:2000]
            messages.append({"role": "assistant", "content": completion.content})
            messages.append(
                {
                    "role": "user",
                    "content": f"That plan is not valid: {problem}\nAnswer with a corrected plan.",
                }
            )
    raise LLMError(f"the model did not produce a valid plan: {problem}")


async def next_step_from_llm(
    llm: LLMDriver, plan: PlanContextData, variables: Mapping[str, Any], *, attempts: int = 2
) -> NextStep:
    """Ask ``llm`` what a plan should do after the event in ``variables``.

    Raises:
        LLMError: no valid decision after ``attempts`` tries.
    """
    situation = {
        "goal_event": plan.goal_event,
        "goal_data": plan.goal_data,
        "results": plan.results,
        "current_state": plan.current_state,
        "event": variables.get("event"),
        "success": variables.get("success"),
        "result": variables.get("result"),
        "error": variables.get("error"),
    }
    messages: list[ChatMessage] = [
        {"role": "system", "content": _STEP_SYSTEM},
        {"role": "user", "content": json.dumps(situation, default=str)},
    ]
    problem = ""
    for _ in range(max(1, attempts)):
        completion = await llm.complete(messages, temperature=0, json_mode=True)
        try:
            answer = _StepAnswer.model_validate(parse_json_object(completion.content))
            if answer.kind == "action" and answer.action is None:
                raise ValueError("kind 'action' needs an 'action' object")
            return NextStep(
                kind=answer.kind, action=answer.action, result=answer.result, reason=answer.reason
            )
        except (LLMError, ValidationError, ValueError) as exc:
            problem = str(exc)[:2000]
            messages.append({"role": "assistant", "content": completion.content})
            messages.append({"role": "user", "content": f"Not valid: {problem}. Answer again."})
    raise LLMError(f"the model did not decide a valid next step: {problem}")
