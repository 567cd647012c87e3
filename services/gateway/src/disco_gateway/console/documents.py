"""The AsyncAPI documents a gateway instance read last for the console's Bus page, with
their ETags, so that the next view asks the registry only whether they changed."""

from __future__ import annotations

from collections import OrderedDict

from disco.asyncapi import BusDocument

__all__ = ["BusDocuments"]

DocumentKey = tuple[str, str, str]  # tenant, agent filter, event type filter


class BusDocuments:
    """Documents by (tenant, agent, event type) with their ETags; the least recently
    used go first once ``kept`` are held."""

    def __init__(self, kept: int = 32) -> None:
        self.kept = kept
        self._documents: OrderedDict[DocumentKey, tuple[str, BusDocument]] = OrderedDict()

    def get(self, key: DocumentKey) -> tuple[str, BusDocument] | None:
        """The ETag and document kept for ``key``, if any."""
        found = self._documents.get(key)
        if found is not None:
            self._documents.move_to_end(key)
        return found

    def put(self, key: DocumentKey, etag: str, document: BusDocument) -> None:
        """Keep ``document`` (with its ``etag``) for ``key``."""
        self._documents[key] = (etag, document)
        self._documents.move_to_end(key)
        while len(self._documents) > self.kept:
            self._documents.popitem(last=False)
