"""A small service built with the kit, to exercise it as a real service would use it.

It owns a scratch schema with a tenant-scoped table (``notes``), a user-private
table with public rows (``diary``) and an outbox, created by the fixtures with
the same migration helpers the services' migrations use.
"""

# ruff: noqa: S608 - SQL names the scratch schema the fixtures generated, never input

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field
from sqlalchemy import text

from disco.clients import RegistryClient
from disco_common.auth import Role
from disco_common.envelope import BusinessFact
from disco_common.ids import new_id
from disco_common.topics import Topic
from disco_service import (
    Conflict,
    Identity,
    IdentityDep,
    NotFound,
    SessionDep,
    error_responses,
    publish_after_commit,
    require_role,
)

NOTE_CREATED = "note.created"

router = APIRouter(responses=error_responses(401, 403))

AdminDep = Annotated[Identity, Depends(require_role(Role.ADMIN))]


class NoteCreate(BaseModel):
    body: str = Field(min_length=1, max_length=10_000)
    priority: int = Field(default=0, ge=0, le=5)


class Note(BaseModel):
    id: str
    tenant_id: str
    body: str


class WhoAmI(BaseModel):
    tenant_id: str
    user_id: str
    sub: str
    roles: list[str]
    on_behalf_of: bool


def schema_of(session: Any) -> str:
    return str(session.info["disco.schema"])


@router.get("/whoami", response_model=WhoAmI)
async def whoami(identity: IdentityDep) -> WhoAmI:
    return WhoAmI(
        tenant_id=identity.tenant_id,
        user_id=identity.user_id,
        sub=identity.sub,
        roles=sorted(role.value for role in identity.roles),
        on_behalf_of=identity.on_behalf_of,
    )


@router.get("/admin/ping")
async def admin_ping(identity: AdminDep) -> dict[str, str]:
    return {"ok": identity.sub}


@router.post("/notes", response_model=Note, status_code=201, responses=error_responses(409))
async def create_note(
    payload: NoteCreate,
    session: SessionDep,
    identity: IdentityDep,
    fail_after_publish: Annotated[bool, Query()] = False,
) -> Note:
    note = Note(id=new_id(), tenant_id=identity.tenant_id, body=payload.body)
    await session.execute(
        text(
            f'INSERT INTO "{schema_of(session)}".notes (id, tenant_id, body) '
            "VALUES (:id, :tenant, :body)"
        ),
        {"id": note.id, "tenant": note.tenant_id, "body": note.body},
    )
    await publish_after_commit(
        session,
        Topic.BUSINESS_FACTS,
        BusinessFact(source="disco://service/kit-test", type=NOTE_CREATED, subject=note.id),
    )
    if fail_after_publish:
        raise Conflict("refused after writing: the transaction must roll back")
    return note


@router.get("/notes", response_model=list[Note])
async def list_notes(session: SessionDep) -> list[Note]:
    # No tenant filter on purpose: this route shows what row-level security alone lets through.
    rows = await session.execute(
        text(f'SELECT id, tenant_id, body FROM "{schema_of(session)}".notes ORDER BY body')
    )
    return [Note(id=row.id, tenant_id=row.tenant_id, body=row.body) for row in rows]


@router.get("/notes/{note_id}", response_model=Note, responses=error_responses(404))
async def get_note(note_id: str, session: SessionDep) -> Note:
    row = (
        await session.execute(
            text(f'SELECT id, tenant_id, body FROM "{schema_of(session)}".notes WHERE id = :id'),
            {"id": note_id},
        )
    ).first()
    if row is None:
        raise NotFound(f"No note {note_id}.")
    return Note(id=row.id, tenant_id=row.tenant_id, body=row.body)


@router.put("/notes/{note_id}", response_model=Note, responses=error_responses(404))
async def update_note(note_id: str, payload: NoteCreate, session: SessionDep) -> Note:
    row = (
        await session.execute(
            text(
                f'UPDATE "{schema_of(session)}".notes SET body = :body WHERE id = :id '
                "RETURNING id, tenant_id, body"
            ),
            {"id": note_id, "body": payload.body},
        )
    ).first()
    if row is None:
        raise NotFound(f"No note {note_id}.")
    return Note(id=row.id, tenant_id=row.tenant_id, body=row.body)


@router.post("/notes/{note_id}/copy", response_model=Note, responses=error_responses(409))
async def copy_note_with_same_id(note_id: str, session: SessionDep, identity: IdentityDep) -> Note:
    # Inserts a second row under an existing key without checking first: the
    # unique violation must come back as a 409, not a 500.
    await session.execute(
        text(
            f'INSERT INTO "{schema_of(session)}".notes (id, tenant_id, body) '
            "VALUES (:id, :tenant, 'copy')"
        ),
        {"id": note_id, "tenant": identity.tenant_id},
    )
    await session.flush()
    return Note(id=note_id, tenant_id=identity.tenant_id, body="copy")


@router.get("/boom")
async def boom(identity: IdentityDep) -> None:
    raise RuntimeError("secret internals: password=hunter2")


@router.get("/upstream")
async def upstream(identity: IdentityDep, port: Annotated[int, Query()]) -> None:
    """Calls a registry at ``port`` (nothing listens there in the test)."""
    async with RegistryClient(f"http://127.0.0.1:{port}", retries=0) as registry:
        await registry.list_agents()


@router.post("/echo")
async def echo(payload: NoteCreate) -> NoteCreate:
    return payload
