"""The bus's topics.

Every topic name can carry a prefix (``DISCO_TOPIC_PREFIX``) so that several
environments or test runs share one cluster without seeing each other.
"""

from __future__ import annotations

import re
from enum import StrEnum

__all__ = [
    "DLQ_SUFFIX",
    "TOPIC_PREFIX_PATTERN",
    "Topic",
    "dlq_topic",
    "strip_prefix",
    "topic_name",
    "validate_topic_prefix",
]


class Topic(StrEnum):
    """The five topics agents talk over."""

    ACTION_REQUESTS = "action-requests"
    """Requests for work: tool invocations, tasks, goals (always with a response_event)."""
    ACTION_RESULTS = "action-results"
    """Responses, correlated by correlation_id."""
    BUSINESS_FACTS = "business-facts"
    """Domain facts; no response expected."""
    SYSTEM_EVENTS = "system-events"
    """Lifecycle and progress: plan.*, task.*, agent.* (what the tracker reads)."""
    NOTIFICATION_EVENTS = "notification-events"
    """Human-facing traffic: HITL questions and answers, agent UI events, tool approvals."""


DLQ_SUFFIX = ".dlq"

# Kafka topic names allow [a-zA-Z0-9._-] up to 249 characters; a prefix must leave room.
TOPIC_PREFIX_PATTERN = re.compile(r"^[a-zA-Z0-9._-]{0,100}$")
_TOPIC_PATTERN = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def validate_topic_prefix(prefix: str) -> str:
    """Return ``prefix`` if it may prefix a Kafka topic name, else raise ValueError."""
    if not TOPIC_PREFIX_PATTERN.fullmatch(prefix):
        raise ValueError(
            f"topic prefix {prefix!r} is not valid: use at most 100 characters of "
            "letters, digits, '.', '_' and '-'"
        )
    return prefix


def topic_name(topic: str | Topic, prefix: str = "") -> str:
    """The name of ``topic`` on the broker, with ``prefix`` in front.

    ``topic`` may be one of :class:`Topic` or any other topic name an agent uses.
    """
    validate_topic_prefix(prefix)
    name = f"{prefix}{topic}"
    if not _TOPIC_PATTERN.fullmatch(name):
        raise ValueError(
            f"topic name {name!r} is not valid: Kafka allows 1-249 characters of "
            "letters, digits, '.', '_' and '-'"
        )
    return name


def dlq_topic(topic: str) -> str:
    """The dead-letter topic for ``topic`` (already prefixed): ``<topic>.dlq``."""
    return f"{topic}{DLQ_SUFFIX}"


def strip_prefix(name: str, prefix: str) -> str:
    """The logical topic of a broker topic name, without ``prefix``."""
    return name[len(prefix) :] if prefix and name.startswith(prefix) else name
