"""Records on the wire: what the bus sends for an envelope, and dead-letter headers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from disco_common.envelope import Envelope, KafkaHeaders

__all__ = ["DlqHeader", "OutgoingRecord", "dead_letter_headers", "record_for", "record_size"]

# aiokafka frames every record in a batch; keep room for that framing when
# comparing a record with the broker's limit.
_RECORD_OVERHEAD = 128
_MAX_ERROR_MESSAGE = 4000


class DlqHeader(StrEnum):
    """Headers the bus adds to a record it dead-letters to ``<topic>.dlq``.

    The original key, value and headers are kept unchanged; these are added
    (replacing earlier ``dlq_*`` headers if the record was dead-lettered before).
    """

    ERROR_TYPE = "dlq_error_type"
    """Class name of the error; ``EnvelopeError`` for a value that is not an envelope."""
    ERROR_MESSAGE = "dlq_error_message"
    """The error text; for a malformed value, the reason it is not an envelope."""
    ORIGINAL_TOPIC = "dlq_original_topic"
    """The topic the record was read from (with the environment prefix)."""
    ORIGINAL_PARTITION = "dlq_original_partition"
    ORIGINAL_OFFSET = "dlq_original_offset"
    ATTEMPTS = "dlq_attempts"
    """How many times a handler was called (0: the value could not be parsed)."""
    CONSUMER_GROUP = "dlq_consumer_group"
    FAILED_AT = "dlq_failed_at"
    """When the bus gave up, ISO 8601 in UTC."""


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    """The key, value and headers of one record."""

    key: bytes
    value: bytes
    headers: KafkaHeaders

    @property
    def size(self) -> int:
        """Bytes the record takes in a produce request (an upper estimate)."""
        return record_size(self.key, self.value, self.headers)


def record_for(envelope: Envelope, credential: tuple[str, bytes] | None = None) -> OutgoingRecord:
    """The record that carries ``envelope``, with the producer's ``credential`` header
    (``disco-tenant-credential``) when it has one."""
    headers = envelope.kafka_headers()
    if credential is not None:
        headers.append(credential)
    return OutgoingRecord(
        key=envelope.kafka_key(), value=envelope.to_kafka_value(), headers=headers
    )


def record_size(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]]
) -> int:
    """Bytes a record takes in a produce request (an upper estimate)."""
    size = _RECORD_OVERHEAD + len(key or b"") + len(value or b"")
    for name, header_value in headers:
        size += len(name) + len(header_value or b"") + 8
    return size


def dead_letter_headers(
    original: Sequence[tuple[str, bytes]],
    *,
    error_type: str,
    error_message: str,
    topic: str,
    partition: int,
    offset: int,
    attempts: int,
    group: str,
    failed_at: datetime | None = None,
) -> KafkaHeaders:
    """The original headers plus the :class:`DlqHeader` ones."""
    if len(error_message) > _MAX_ERROR_MESSAGE:
        error_message = error_message[: _MAX_ERROR_MESSAGE - 1] + "…"
    when = (failed_at or datetime.now(UTC)).isoformat()
    kept = [(name, value) for name, value in original if not name.startswith("dlq_")]
    return [
        *kept,
        (DlqHeader.ERROR_TYPE.value, error_type.encode()),
        (DlqHeader.ERROR_MESSAGE.value, error_message.encode()),
        (DlqHeader.ORIGINAL_TOPIC.value, topic.encode()),
        (DlqHeader.ORIGINAL_PARTITION.value, str(partition).encode()),
        (DlqHeader.ORIGINAL_OFFSET.value, str(offset).encode()),
        (DlqHeader.ATTEMPTS.value, str(attempts).encode()),
        (DlqHeader.CONSUMER_GROUP.value, group.encode()),
        (DlqHeader.FAILED_AT.value, when.encode()),
    ]
