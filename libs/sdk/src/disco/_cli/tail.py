"""``disco tail``: watch envelopes go by on the bus.

A group-less reader: it never joins a consumer group and never commits, so it
cannot take work from an agent or move anyone's offsets.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import time
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from disco_common.envelope import Envelope, EnvelopeError
from disco_common.topics import DLQ_SUFFIX, Topic

_DEFAULT_TOPICS = [topic.value for topic in Topic]
_COLOURS = {
    Topic.ACTION_REQUESTS.value: typer.colors.CYAN,
    Topic.ACTION_RESULTS.value: typer.colors.GREEN,
    Topic.BUSINESS_FACTS.value: typer.colors.BLUE,
    Topic.SYSTEM_EVENTS.value: typer.colors.MAGENTA,
    Topic.NOTIFICATION_EVENTS.value: typer.colors.YELLOW,
}


def format_envelope(topic: str, envelope: Envelope, *, data_chars: int = 160) -> str:
    """One line about ``envelope``: time, topic, type, the ids that matter, the data."""
    ids = [
        f"{name}={value}"
        for name, value in (
            ("tenant", envelope.tenant_id),
            ("corr", envelope.correlation_id),
            ("plan", envelope.plan_id),
            ("task", envelope.task_id),
            ("reply", envelope.response_event),
        )
        if value
    ]
    data = json.dumps(envelope.data, separators=(",", ":"), default=str)
    if len(data) > data_chars:
        data = data[: data_chars - 1] + "…"
    stamp = envelope.time.strftime("%H:%M:%S.%f")[:-3]
    return f"{stamp} {topic:<20} {envelope.type:<32} {' '.join(ids)}  {data}"


async def _tail(
    topics: Sequence[str],
    *,
    event_type: str | None,
    tenant: str | None,
    correlation_id: str | None,
    from_beginning: bool,
    limit: int | None,
    raw: bool,
    seconds: float | None,
) -> int:
    from disco.bus import BusError, TopicReader
    from disco.settings import BusSettings

    settings = BusSettings()
    reader = TopicReader(settings, topics, from_beginning=from_beginning, metadata_timeout=3.0)
    try:
        await reader.start()
    except BusError as exc:
        typer.secho(f"{exc} (is the stack up?)", fg=typer.colors.RED, err=True)
        return 1
    shown = 0
    try:
        deadline = time.monotonic() + seconds if seconds is not None else None
        while deadline is None or time.monotonic() < deadline:
            for record in await reader.read():
                line = _line(
                    record.value,
                    record.headers,
                    record.topic,
                    event_type,
                    tenant,
                    correlation_id,
                    raw,
                )
                if line is None:
                    continue
                typer.secho(line, fg=_COLOURS.get(record.topic.removesuffix(DLQ_SUFFIX)))
                shown += 1
                if limit is not None and shown >= limit:
                    return 0
    finally:
        await reader.stop()
    return 0


def _line(
    value: bytes | None,
    headers: Sequence[tuple[str, bytes]],
    topic: str,
    event_type: str | None,
    tenant: str | None,
    correlation_id: str | None,
    raw: bool,
) -> str | None:
    try:
        envelope = Envelope.from_kafka_record(value, headers)
    except EnvelopeError as exc:
        return f"{'':12} {topic:<20} (not an envelope: {exc.reason})"
    if event_type is not None and not fnmatch.fnmatchcase(envelope.type, event_type):
        return None
    if tenant is not None and envelope.tenant_id != tenant:
        return None
    if correlation_id is not None and correlation_id not in {
        envelope.correlation_id,
        envelope.id,
        envelope.plan_id,
        envelope.task_id,
    }:
        return None
    if raw:
        return envelope.model_dump_json(exclude_none=True, by_alias=True)
    return format_envelope(topic, envelope)


def tail(
    topic: Annotated[
        list[str] | None,
        typer.Argument(help="Topics to watch (default: the five disco topics). Add .dlq for DLQs."),
    ] = None,
    event_type: Annotated[
        str | None, typer.Option("--type", "-t", help="Only these event types (glob: 'task.*').")
    ] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant.")] = None,
    correlation_id: Annotated[
        str | None,
        typer.Option(
            "--id", help="Only envelopes with this id as correlation, plan, task or own id."
        ),
    ] = None,
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", "-b", help="Start at the oldest envelope kept.")
    ] = False,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="Stop after N.", min=1)] = None,
    seconds: Annotated[
        float | None, typer.Option("--seconds", help="Stop after this long.", min=0.1)
    ] = None,
    raw: Annotated[bool, typer.Option("--json", help="Print whole envelopes as JSON.")] = False,
) -> None:
    """Print envelopes as they pass on the bus (group-less: takes no one's work)."""
    options: dict[str, Any] = {
        "event_type": event_type,
        "tenant": tenant,
        "correlation_id": correlation_id,
        "from_beginning": from_beginning,
        "limit": limit,
        "raw": raw,
        "seconds": seconds,
    }
    try:
        code = asyncio.run(_tail(topic or _DEFAULT_TOPICS, **options))
    except KeyboardInterrupt:
        code = 0
    raise typer.Exit(code)
