"""The AsyncAPI document of a disco bus: fetch it, read it, compare two.

The registry builds the document from what is registered now (``GET
/v1/asyncapi``, :meth:`disco.clients.RegistryClient.asyncapi`); ``disco asyncapi``
writes it to a file and checks a saved one against the live bus. The rules that
say whether a schema change breaks agents are in :func:`compare_schemas`.
"""

from disco.asyncapi._compat import RECEIVERS, SENDERS, SchemaChange, compare_schemas
from disco.asyncapi._diff import BusDiff, MessageChange, compare_documents
from disco.asyncapi._document import BusAgent, BusDocument, BusMessage, BusTopic, SchemaRow
from disco.asyncapi._fetched import FetchedDocument, parse_document

__all__ = [
    "RECEIVERS",
    "SENDERS",
    "BusAgent",
    "BusDiff",
    "BusDocument",
    "BusMessage",
    "BusTopic",
    "FetchedDocument",
    "MessageChange",
    "SchemaChange",
    "SchemaRow",
    "compare_documents",
    "compare_schemas",
    "parse_document",
]
