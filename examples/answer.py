"""Answer an agent's question to a human (HITL) from the command line.

    uv run python examples/answer.py            # list the questions waiting for an answer
    uv run python examples/answer.py yes        # answer the latest one
    uv run python examples/answer.py no --question <correlation id>

Questions are ``notification.human_input`` envelopes on ``notification-events``;
the answer goes back there typed as the question's ``response_event`` with its
correlation id, exactly as a UI would send it. A question already answered (or
timed out by the tracker) is not listed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.envelope import Envelope, EnvelopeError
from disco_common.notifications import HumanInputRequest, HumanInputResponse, NotificationType
from disco_common.topics import Topic


async def read_notifications(settings: BusSettings) -> list[Envelope]:
    """Every envelope on notification-events so far (group-less, from the beginning)."""
    name = f"{settings.topic_prefix}{Topic.NOTIFICATION_EVENTS}"
    consumer = AIOKafkaConsumer(enable_auto_commit=False, **settings.kafka_connection_options())
    await consumer.start()
    try:
        await consumer.topics()
        partitions = [TopicPartition(name, p) for p in consumer.partitions_for_topic(name) or ()]
        if not partitions:
            return []
        consumer.assign(partitions)
        await consumer.seek_to_beginning()
        found: list[Envelope] = []
        idle = 0
        # Read until the topic stays quiet (end offsets are not reliable on every
        # Kafka-protocol broker, so "caught up" means "nothing more came").
        while idle < 3:
            batches = await consumer.getmany(timeout_ms=300)
            idle = 0 if batches else idle + 1
            for records in batches.values():
                for record in records:
                    try:
                        found.append(Envelope.from_kafka_value(record.value))
                    except EnvelopeError:
                        continue
        return sorted(found, key=lambda envelope: envelope.time)
    finally:
        await consumer.stop()


def pending(notifications: list[Envelope]) -> list[tuple[Envelope, HumanInputRequest]]:
    """Questions without an answer yet, oldest first."""
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
        (envelope, body)
        for envelope, body in questions
        if (envelope.correlation_id or "", body.response_event) not in answered
    ]


def describe(envelope: Envelope, body: HumanInputRequest) -> str:
    options = f"  options: {[o.value for o in body.options]}" if body.options else ""
    who = f"task {body.task_id}" if body.task_id else f"plan {body.plan_id}"
    return f"[{envelope.correlation_id}] {body.question}{options}  ({who})"


async def main(answer: str | None, question_id: str | None) -> int:
    settings = BusSettings()
    waiting = pending(await read_notifications(settings))
    if question_id is not None:
        waiting = [item for item in waiting if item[0].correlation_id == question_id]
    if not waiting:
        print("no question is waiting for an answer")
        return 1
    if answer is None:
        for envelope, body in waiting:
            print(describe(envelope, body))
        return 0
    envelope, body = waiting[-1]
    value: Any = answer
    with contextlib.suppress(json.JSONDecodeError):
        value = json.loads(answer)  # numbers, booleans and objects as JSON; text as it is
    async with BusClient(settings, name="answer") as bus:
        await bus.publish(
            Topic.NOTIFICATION_EVENTS,
            body.response_event,
            HumanInputResponse(
                answer=value, request_id=envelope.id, task_id=body.task_id, plan_id=body.plan_id
            ),
            correlation_id=envelope.correlation_id,
            tenant_id=envelope.tenant_id,
            user_id=envelope.user_id,
            session_id=envelope.session_id,
            plan_id=envelope.plan_id,
            task_id=envelope.task_id,
        )
    print(f"answered {body.question!r} with {value!r}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "answer", nargs="?", help="the answer (JSON or text); omit to list questions"
    )
    parser.add_argument("--question", help="the correlation id of the question to answer")
    arguments = parser.parse_args()
    sys.exit(asyncio.run(main(arguments.answer, arguments.question)))
