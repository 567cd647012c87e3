"""The dead-letter topics as the console shows them, and putting one record back.

A consumer that gives up on a record copies it byte for byte to
``<topic>.dlq`` with the reason in :class:`~disco.bus.DlqHeader` headers. The
console reads the newest records of the five disco topics' DLQs with the SDK's
group-less :class:`~disco.bus.TopicReader` (it takes nobody's work and moves
no offset), and shows a person only their own tenant's records (the
``tenant_id`` header); records with no tenant (values that are not envelopes)
only to admins.

Republishing sends the record's key, value and original headers (the ``dlq_*``
ones dropped) back to the topic it was read from, and writes an audit log line.
Consumers deduplicate on the envelope id, and a dead-lettered id was never
marked handled, so the record is handled again.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import datetime

import structlog

from disco.bus import BusClient, BusError, DlqHeader, ReadRecord, TopicReader
from disco.settings import BusSettings
from disco_common.auth import TENANT_CREDENTIAL_HEADER
from disco_common.envelope import Envelope, EnvelopeError
from disco_common.topics import Topic, dlq_topic
from disco_gateway.console.auth import ConsoleUser
from disco_service import Forbidden, NotFound, ServiceUnavailable

__all__ = ["DeadLetter", "read_dead_letters", "republish"]

audit = structlog.get_logger("disco_gateway.console.audit")

_PREVIEW_CHARS = 2000
_READ_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class DeadLetter:
    """One dead-lettered record and why."""

    topic: str
    """The DLQ topic (logical, e.g. ``action-requests.dlq``)."""
    partition: int
    offset: int
    original_topic: str
    """The topic it was read from, as the broker names it (with the prefix)."""
    original_partition: int | None
    original_offset: int | None
    error_type: str
    error_message: str
    attempts: int | None
    consumer_group: str
    failed_at: datetime | None
    tenant_id: str | None
    envelope: Envelope | None
    """The record as an envelope, or None when its value is not one."""
    preview: str
    """The value as text, bounded."""

    @property
    def key(self) -> str:
        """Names the record in a form and a URL."""
        return f"{self.topic}:{self.partition}:{self.offset}"


def _header(record: ReadRecord, name: str) -> str | None:
    for header, value in reversed(record.headers):
        if header == name:
            return value.decode("utf-8", "replace")
    return None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _time(value: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if value else None
    except ValueError:
        return None


def _preview(value: bytes | None) -> str:
    if value is None:
        return ""
    text = value.decode("utf-8", "replace")
    with contextlib.suppress(ValueError):
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"


def _dead_letter(record: ReadRecord) -> DeadLetter:
    try:
        envelope: Envelope | None = record.envelope()
    except EnvelopeError:
        envelope = None
    tenant = _header(record, "tenant_id") or (envelope.tenant_id if envelope else None)
    return DeadLetter(
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        original_topic=_header(record, DlqHeader.ORIGINAL_TOPIC) or "",
        original_partition=_int(_header(record, DlqHeader.ORIGINAL_PARTITION)),
        original_offset=_int(_header(record, DlqHeader.ORIGINAL_OFFSET)),
        error_type=_header(record, DlqHeader.ERROR_TYPE) or "unknown",
        error_message=_header(record, DlqHeader.ERROR_MESSAGE) or "",
        attempts=_int(_header(record, DlqHeader.ATTEMPTS)),
        consumer_group=_header(record, DlqHeader.CONSUMER_GROUP) or "",
        failed_at=_time(_header(record, DlqHeader.FAILED_AT)),
        tenant_id=tenant or None,
        envelope=envelope,
        preview=_preview(record.value),
    )


def _visible(letter: DeadLetter, user: ConsoleUser) -> bool:
    if letter.tenant_id is None:
        return user.is_admin
    return letter.tenant_id == user.tenant_id


async def _read(settings: BusSettings, limit: int) -> list[tuple[ReadRecord, DeadLetter]]:
    topics = [dlq_topic(topic) for topic in Topic]
    try:
        async with TopicReader(settings, topics, last=limit, metadata_timeout=3.0) as reader:
            records = await reader.read_to_end()
    except BusError as exc:
        raise ServiceUnavailable(f"The dead-letter topics cannot be read: {exc}") from exc
    return [(record, _dead_letter(record)) for record in records]


async def read_dead_letters(
    settings: BusSettings, user: ConsoleUser, *, limit: int
) -> list[DeadLetter]:
    """The newest dead-lettered records ``user`` may see, newest first.

    Args:
        settings: the bus settings (the topic prefix picks the environment).
        user: the signed-in person.
        limit: how many of the newest records to read per partition of each DLQ topic.

    Raises:
        ServiceUnavailable: the broker could not be read.
    """
    letters = [letter for _, letter in await _read(settings, limit) if _visible(letter, user)]
    letters.sort(key=lambda letter: (letter.failed_at is not None, letter.failed_at), reverse=True)
    return letters


async def republish(
    bus: BusClient, user: ConsoleUser, *, topic: str, partition: int, offset: int, limit: int
) -> DeadLetter:
    """Send the dead-lettered record at ``topic``/``partition``/``offset`` back where it failed.

    Raises:
        Forbidden: the person is not an admin of the record's tenant.
        NotFound: no such record among the newest ``limit`` the person may see.
        UnprocessableEntity: the record does not say where it came from.
    """
    if not user.is_admin:
        raise Forbidden("Republishing a dead letter needs the `admin` role.")
    found = [
        (record, letter)
        for record, letter in await _read(bus.settings, limit)
        if (record.topic, record.partition, record.offset) == (topic, partition, offset)
        and _visible(letter, user)
    ]
    if not found:
        raise NotFound(f"No dead letter {topic}:{partition}:{offset} among the newest {limit}.")
    record, letter = found[0]
    prefix = bus.settings.topic_prefix
    if not letter.original_topic.startswith(prefix) or letter.original_topic.endswith(".dlq"):
        raise Forbidden(
            f"The record came from {letter.original_topic!r}, which is not a topic of this "
            f"environment (prefix {prefix!r})."
        )
    # The admin of the record's tenant vouches for it now (their token replaces the
    # producer's credential, which may have expired or never have been valid).
    headers = [
        (name, value)
        for name, value in record.headers
        if not name.startswith("dlq_") and name != TENANT_CREDENTIAL_HEADER
    ]
    if user.identity.credential is not None:
        headers.append((TENANT_CREDENTIAL_HEADER, user.identity.credential.encode()))
    await bus.send_record(letter.original_topic, record.key, record.value, headers)
    audit.info(
        "dead_letter_republished",
        actor=user.identity.sub,
        tenant_id=user.tenant_id,
        user_id=user.user_id,
        dlq_topic=topic,
        dlq_partition=partition,
        dlq_offset=offset,
        topic=letter.original_topic,
        event_id=letter.envelope.id if letter.envelope else None,
        event_type=letter.envelope.type if letter.envelope else None,
        error_type=letter.error_type,
    )
    return letter
