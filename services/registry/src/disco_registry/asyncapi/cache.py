"""Documents kept per tenant until a registration, a schema version or an expiry may
have changed them (the rules: :mod:`disco_registry.tenant_cache`)."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pydantic_core
import yaml

from disco_registry.tenant_cache import TenantCache

__all__ = ["AsyncApiCache", "AsyncApiKey", "BuiltDocument"]

AsyncApiKey = tuple[str, str | None, str | None]  # tenant, agent, event type


@dataclass(slots=True)
class BuiltDocument:
    """One document as JSON, with its hash; its YAML made when first asked for."""

    json: bytes
    digest: str
    _yaml: bytes | None = None
    _making_yaml: asyncio.Lock | None = None

    @classmethod
    def of(cls, document: object) -> BuiltDocument:
        """``document`` serialised once (its keys in the order given)."""
        data = pydantic_core.to_json(document)
        return cls(json=data, digest=hashlib.blake2b(data, digest_size=16).hexdigest())

    async def yaml_text(self) -> bytes:
        """:meth:`yaml`, made in a worker thread the first time (seconds for a large
        document), once however many ask at the same time."""
        if self._yaml is not None:
            return self._yaml
        if self._making_yaml is None:
            self._making_yaml = asyncio.Lock()
        async with self._making_yaml:
            return await asyncio.to_thread(self.yaml)

    def yaml(self) -> bytes:
        """The same document as YAML (made once, then kept)."""
        if self._yaml is None:
            self._yaml = yaml.dump(
                pydantic_core.from_json(self.json),
                Dumper=_Dumper,
                sort_keys=False,
                allow_unicode=True,
                width=100,
            ).encode()
        return self._yaml


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """libyaml's safe dumper when present, with text of several lines as a block."""


def _text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _text)


def _size(built: BuiltDocument) -> int:
    # Room for its YAML too (about as long as the JSON).
    return 2 * len(built.json)


class AsyncApiCache(TenantCache[AsyncApiKey, BuiltDocument]):
    """Documents per tenant and filter, and the builds in flight (one per key at a time:
    callers that ask while one runs wait for it)."""

    def __init__(self, *, max_bytes: int, max_age_seconds: float) -> None:
        super().__init__(max_bytes=max_bytes, max_age_seconds=max_age_seconds, size_of=_size)
        self._building: dict[AsyncApiKey, asyncio.Task[BuiltDocument]] = {}

    async def once(
        self, key: AsyncApiKey, build: Callable[[], Awaitable[BuiltDocument]]
    ) -> BuiltDocument:
        """``build()``'s answer, shared by every caller of ``key`` while it runs.

        The build runs as a task of its own: a caller that goes away (a closed
        connection) leaves it to finish for the others, and for the cache.
        """
        task = self._building.get(key)
        if task is None:
            task = asyncio.create_task(_awaited(build), name=f"disco-asyncapi-{key[0]}")
            self._building[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.shield(task)

    def _finished(self, key: AsyncApiKey, task: asyncio.Task[BuiltDocument]) -> None:
        if self._building.get(key) is task:
            del self._building[key]
        if not task.cancelled():
            task.exception()  # retrieved here: a build whose callers all left logs nothing


async def _awaited(build: Callable[[], Awaitable[BuiltDocument]]) -> BuiltDocument:
    return await build()
