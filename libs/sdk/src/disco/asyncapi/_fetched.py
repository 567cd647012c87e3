"""A document as the registry sent it (``GET /v1/asyncapi``), and reading one from text."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from disco_common.asyncapi import ASYNCAPI_YAML_MEDIA_TYPE

__all__ = ["FetchedDocument", "parse_document"]


def parse_document(text: str | bytes) -> dict[str, Any]:
    """An AsyncAPI document from its JSON or YAML text.

    Raises:
        ValueError: the text is neither, or is not a mapping (an AsyncAPI document is one).
    """
    raw = text.decode("utf-8") if isinstance(text, bytes) else text
    try:
        document = json.loads(raw)
    except ValueError:
        try:
            document = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ValueError(f"not JSON or YAML: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError("not an AsyncAPI document: its top level must be a mapping")
    if "asyncapi" not in document:
        raise ValueError("not an AsyncAPI document: it has no `asyncapi` version field")
    return document


@dataclass(frozen=True)
class FetchedDocument:
    """The AsyncAPI document of a bus, as the registry sent it.

    Attributes:
        content: the document's bytes (JSON, or YAML when asked for).
        etag: its ETag: pass it as ``if_none_match`` to learn cheaply whether it changed.
        media_type: ``application/json`` or ``application/yaml``.
    """

    content: bytes
    etag: str
    media_type: str

    @property
    def is_yaml(self) -> bool:
        """Whether the content is YAML."""
        return self.media_type.startswith(ASYNCAPI_YAML_MEDIA_TYPE)

    def as_dict(self) -> dict[str, Any]:
        """The document, parsed."""
        return parse_document(self.content)
