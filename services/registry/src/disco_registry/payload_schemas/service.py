"""Payload schema versions: immutable per version, ordered by semver precedence."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import JsonValue
from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.canonical import json_hash
from disco_common.ids import semver_sort_key
from disco_common.pagination import Page, PageQuery
from disco_common.registry import (
    PayloadSchema,
    PayloadSchemaCreate,
    SchemaRef,
    SchemaValidationResult,
    validate_payload,
)
from disco_registry.errors import (
    SchemaNotFound,
    SchemaVersionConflict,
    UnknownSchemaReference,
)
from disco_registry.payload_schemas.repository import PayloadSchemaRepository
from disco_service import Paginator

__all__ = [
    "create_schema",
    "get_latest",
    "get_version",
    "list_versions",
    "resolve_refs",
    "validate_against",
]

# Sort key: (semver_sort_key(version), version), highest first.
_VERSION_PAGES = Paginator("schema_versions", tuple[str, str])


async def create_schema(
    session: AsyncSession, *, tenant_id: str, schema: PayloadSchemaCreate
) -> tuple[PayloadSchema, bool]:
    """Store a version; ``(schema, created)``.

    Re-posting a version with the same ``json_schema`` returns the stored one
    (``created`` False; its description is kept). Concurrent posts of one
    version are safe: the primary key decides who was first.

    Raises:
        SchemaVersionConflict: the version exists with a different ``json_schema``.
    """
    repository = PayloadSchemaRepository(session)
    content_hash = json_hash(schema.json_schema)
    inserted = await repository.insert_if_absent(
        tenant_id=tenant_id,
        name=schema.name,
        version=schema.version,
        sort_key=semver_sort_key(schema.version),
        json_schema=schema.json_schema,
        description=schema.description,
        content_hash=content_hash,
    )
    if inserted is not None:
        return inserted, True
    existing = await repository.get(tenant_id=tenant_id, name=schema.name, version=schema.version)
    if existing is None:  # pragma: no cover - a version is never deleted
        raise SchemaNotFound(f"schema {schema.name}@{schema.version} vanished; retry")
    if existing.content_hash != content_hash:
        raise SchemaVersionConflict(
            f"schema {schema.name}@{schema.version} already exists with different content; "
            "versions are immutable: publish the change under a new version",
            details={
                "name": schema.name,
                "version": schema.version,
                "existing_content_hash": existing.content_hash,
                "content_hash": content_hash,
            },
        )
    return existing, False


async def get_version(
    session: AsyncSession, *, tenant_id: str, name: str, version: str
) -> PayloadSchema | None:
    """One version, or None."""
    return await PayloadSchemaRepository(session).get(
        tenant_id=tenant_id, name=name, version=version
    )


async def get_latest(session: AsyncSession, *, tenant_id: str, name: str) -> PayloadSchema | None:
    """The version with the highest precedence, or None."""
    return await PayloadSchemaRepository(session).latest(tenant_id=tenant_id, name=name)


async def list_versions(
    session: AsyncSession, *, tenant_id: str, name: str, query: PageQuery
) -> Page[PayloadSchema]:
    """A page of ``name``'s versions, newest (highest precedence) first.

    Raises:
        InvalidCursor: ``query.cursor`` was not issued for this schema's version list.
    """
    request = _VERSION_PAGES.open(query, scope=name)
    rows = await PayloadSchemaRepository(session).list_versions(
        tenant_id=tenant_id, name=name, after=request.after, limit=request.fetch
    )
    return request.page(rows, key=lambda schema: (semver_sort_key(schema.version), schema.version))


async def validate_against(
    session: AsyncSession, *, tenant_id: str, name: str, version: str, payload: JsonValue
) -> SchemaValidationResult:
    """Check ``payload`` against a stored version; every violation is listed.

    Raises:
        SchemaNotFound: no such version.
    """
    schema = await get_version(session, tenant_id=tenant_id, name=name, version=version)
    if schema is None:
        raise SchemaNotFound(f"no payload schema {name}@{version}")
    return validate_payload(schema.json_schema, payload, schema_ref=schema.ref)


async def resolve_refs(
    session: AsyncSession, *, tenant_id: str, refs: Iterable[SchemaRef]
) -> dict[tuple[str, str], PayloadSchema]:
    """The stored versions ``refs`` name, keyed by ``(name, version)``.

    Raises:
        UnknownSchemaReference: one or more are not registered (all are listed).
    """
    wanted = {(ref.name, ref.version) for ref in refs}
    found = await PayloadSchemaRepository(session).find_many(tenant_id=tenant_id, refs=wanted)
    missing = sorted(wanted - found.keys())
    if missing:
        names = ", ".join(f"{name}@{version}" for name, version in missing)
        raise UnknownSchemaReference(
            f"unknown payload schema reference(s): {names}; register them first with "
            "POST /v1/schemas, or give the schema inline (json_schema)",
            details=[{"name": name, "version": version} for name, version in missing],
        )
    return found
