"""Comparing a saved AsyncAPI document of a bus with another (the live one): which event
types were added, removed or changed, and which changes break the agents built
against the saved one (the rules: :mod:`disco.asyncapi._compat`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from disco.asyncapi._compat import BOTH, RECEIVERS, SENDERS, SchemaChange, compare_schemas
from disco.asyncapi._document import BusDocument, BusMessage

__all__ = ["BusDiff", "MessageChange", "compare_documents"]


@dataclass(frozen=True)
class MessageChange:
    """How one event type differs between the saved document and the live one.

    Attributes:
        event_type: the event type.
        kind: ``added`` (only live), ``removed`` (only saved) or ``changed``.
        topics: its topics (the live ones, or the saved ones when removed).
        schema_before, schema_after: its schema as ``name@version`` (or its source).
        changes: every difference found, each saying whom it breaks.
    """

    event_type: str
    kind: str
    topics: list[str]
    schema_before: str = ""
    schema_after: str = ""
    changes: list[SchemaChange] = field(default_factory=list)

    @property
    def breaking(self) -> bool:
        """Whether agents built against the saved document break."""
        return any(change.breaking for change in self.changes)


@dataclass(frozen=True)
class BusDiff:
    """Every event type that differs (in event type order)."""

    messages: list[MessageChange]

    @property
    def breaking(self) -> list[MessageChange]:
        """The event types whose change breaks agents built against the saved document."""
        return [message for message in self.messages if message.breaking]

    def of(self, kind: str) -> list[MessageChange]:
        """The ``added``, ``removed`` or ``changed`` event types."""
        return [message for message in self.messages if message.kind == kind]


def _payload_changes(
    saved: BusDocument, live: BusDocument, before: BusMessage, after: BusMessage
) -> list[SchemaChange]:
    if before.payload is None and after.payload is None:
        return []
    if before.payload is None:
        return [SchemaChange("", "the payload now has a schema (it took any value)", SENDERS)]
    if after.payload is None:
        return [SchemaChange("", "the payload has no schema any more: any value", RECEIVERS)]
    return compare_schemas(
        before.payload, after.payload, resolve_old=saved.resolve, resolve_new=live.resolve
    )


def _changed(
    saved: BusDocument, live: BusDocument, before: BusMessage, after: BusMessage
) -> MessageChange | None:
    changes: list[SchemaChange] = []
    for topic in before.topics:
        if topic not in after.topics:
            changes.append(SchemaChange("", f"no longer travels on {topic}", BOTH))
    for topic in after.topics:
        if topic not in before.topics:
            changes.append(SchemaChange("", f"now also travels on {topic}"))
    changes.extend(_payload_changes(saved, live, before, after))
    if not changes and before.schema_label == after.schema_label:
        return None
    return MessageChange(
        event_type=after.event_type,
        kind="changed",
        topics=after.topics,
        schema_before=before.schema_label,
        schema_after=after.schema_label,
        changes=changes,
    )


def compare_documents(saved: BusDocument, live: BusDocument) -> BusDiff:
    """What changed from ``saved`` to ``live``, event type by event type.

    An event type only ``live`` has is added (compatible); one only ``saved`` has is
    removed (breaking: no live agent defines it now); one both have is compared by
    topics and payload schema.
    """
    found: list[MessageChange] = []
    for event_type in sorted(set(saved.messages) | set(live.messages)):
        before = saved.messages.get(event_type)
        after = live.messages.get(event_type)
        if before is None and after is not None:
            found.append(
                MessageChange(event_type, "added", after.topics, schema_after=after.schema_label)
            )
        elif after is None and before is not None:
            gone = SchemaChange("", "no live agent defines it now", BOTH)
            found.append(
                MessageChange(
                    event_type,
                    "removed",
                    before.topics,
                    schema_before=before.schema_label,
                    changes=[gone],
                )
            )
        elif before is not None and after is not None:
            change = _changed(saved, live, before, after)
            if change is not None:
                found.append(change)
    return BusDiff(found)
