"""``disco answer``: answer an agent's question to a human (HITL) from the command line.

    disco answer                                # list the questions waiting for an answer
    disco answer yes                            # answer the latest one
    disco answer no --question <correlation id>

The waiting questions come from the tracker's inbox (``TrackerClient``: the
questions it watches, those answered or timed out left out) for the tenant
``DISCO_TENANT_ID``. When no tracker answers, they are read from
``notification-events`` instead (a question nobody answered there yet). The
answer goes back on ``notification-events`` typed as the question's
``response_event`` with its correlation id, exactly as a UI would send it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from disco.bus import BusClient, BusUnavailableError, TopicReader
from disco.clients import ServiceClientSettings, ServiceError, TrackerClient
from disco.settings import BusSettings
from disco_common.envelope import Envelope
from disco_common.notifications import HumanInputRequest, HumanInputResponse, NotificationType
from disco_common.topics import Topic

__all__ = ["Question", "answer", "pending"]


@dataclass(frozen=True)
class Question:
    """A question waiting for an answer, from the tracker or from the topic."""

    correlation_id: str
    response_event: str
    question: str
    request_id: str | None
    tenant_id: str | None
    user_id: str | None = None
    session_id: str | None = None
    plan_id: str | None = None
    task_id: str | None = None
    options: tuple[str, ...] = ()


async def from_tracker(settings: ServiceClientSettings) -> list[Question] | None:
    """The tenant's waiting questions, oldest first; None when the tracker cannot be asked."""
    try:
        async with TrackerClient.from_settings(settings) as tracker:
            return [
                Question(
                    correlation_id=wait.correlation_id,
                    response_event=wait.response_event,
                    question=wait.question or "",
                    request_id=wait.request_id,
                    tenant_id=settings.tenant_id,
                    user_id=wait.user_id,
                    session_id=wait.session_id,
                    plan_id=wait.plan_id,
                    task_id=wait.task_id,
                )
                async for wait in tracker.iter_questions(status="waiting")
            ]
    except ServiceError as exc:
        print(f"(no tracker: {exc.message}; reading notification-events)", file=sys.stderr)
        return None


async def from_topic(settings: BusSettings) -> list[Question]:
    """Questions on notification-events without an answer there yet, oldest first."""
    async with TopicReader(settings, [Topic.NOTIFICATION_EVENTS], from_beginning=True) as reader:
        records = await reader.read_to_end()
    envelopes = sorted(
        (e for record in records if (e := record.envelope_or_none()) is not None),
        key=lambda envelope: envelope.time,
    )
    return pending(envelopes)


def pending(notifications: list[Envelope]) -> list[Question]:
    """The questions among ``notifications`` that no envelope among them answers."""
    questions: list[tuple[Envelope, HumanInputRequest]] = []
    answered: set[tuple[str, str]] = set()
    for envelope in notifications:
        if envelope.type == NotificationType.HUMAN_INPUT and envelope.correlation_id:
            try:
                questions.append((envelope, HumanInputRequest.model_validate(envelope.data)))
            except ValueError:
                continue
        elif envelope.correlation_id:
            answered.add((envelope.correlation_id, envelope.type))
    return [
        Question(
            correlation_id=envelope.correlation_id or "",
            response_event=body.response_event,
            question=body.question,
            request_id=envelope.id,
            tenant_id=envelope.tenant_id,
            user_id=envelope.user_id,
            session_id=envelope.session_id,
            plan_id=body.plan_id or envelope.plan_id,
            task_id=body.task_id or envelope.task_id,
            options=tuple(str(option.value) for option in body.options or ()),
        )
        for envelope, body in questions
        if (envelope.correlation_id or "", body.response_event) not in answered
    ]


def describe(question: Question) -> str:
    options = f"  options: {list(question.options)}" if question.options else ""
    who = f"task {question.task_id}" if question.task_id else f"plan {question.plan_id}"
    return f"[{question.correlation_id}] {question.question}{options}  ({who})"


async def _answer(answer: str | None, question_id: str | None) -> int:
    bus_settings = BusSettings()
    waiting = await from_tracker(ServiceClientSettings())
    if waiting is None:
        waiting = await from_topic(bus_settings)
    if question_id is not None:
        waiting = [item for item in waiting if item.correlation_id == question_id]
    if not waiting:
        print("no question is waiting for an answer")
        return 1
    if answer is None:
        for question in waiting:
            print(describe(question))
        return 0
    question = waiting[-1]
    value: Any = answer
    with contextlib.suppress(json.JSONDecodeError):
        value = json.loads(answer)  # numbers, booleans and objects as JSON; text as it is
    async with BusClient(bus_settings, name="answer") as bus:
        await bus.publish(
            Topic.NOTIFICATION_EVENTS,
            question.response_event,
            HumanInputResponse(
                answer=value,
                request_id=question.request_id,
                task_id=question.task_id,
                plan_id=question.plan_id,
            ),
            correlation_id=question.correlation_id,
            tenant_id=question.tenant_id,
            user_id=question.user_id,
            session_id=question.session_id,
            plan_id=question.plan_id,
            task_id=question.task_id,
        )
    print(f"answered {question.question!r} with {value!r}")
    return 0


def answer(
    value: Annotated[
        str | None,
        typer.Argument(
            help="The answer (JSON: numbers, booleans, objects; else text). Omit it to list "
            "the questions waiting.",
            show_default=False,
        ),
    ] = None,
    question: Annotated[
        str | None,
        typer.Option(
            "--question",
            "-q",
            help="The correlation id of the question to answer (default: the latest).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Answer an agent's question to a human, or list the questions waiting for one.

    The questions come from the tracker's inbox for DISCO_TENANT_ID (from
    notification-events when no tracker answers); the answer goes on
    notification-events as the question's response event, as a UI would send it.
    Exits 1 when no question is waiting (or the broker cannot be reached).
    """
    try:
        code = asyncio.run(_answer(value, question))
    except BusUnavailableError as exc:
        typer.secho(str(exc), fg=typer.colors.RED, err=True)
        code = 1
    raise typer.Exit(code)
