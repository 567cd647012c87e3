"""The AsyncAPI document of a disco bus: fetch it, read it, compare two.

The registry builds the document (``GET /v1/asyncapi``,
:meth:`disco.clients.RegistryClient.asyncapi`); ``disco asyncapi`` writes and
checks it.
"""

from disco.asyncapi._fetched import FetchedDocument, parse_document

__all__ = ["FetchedDocument", "parse_document"]
