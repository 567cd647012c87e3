"""Memory service contracts (``/v1/memory/<family>``).

Families: working memory (plan-scoped key/value with optimistic concurrency),
task context (lookup by sub-task id), plan context (lookup by correlation id),
plans and sessions, semantic memory (vectors), episodic memory
(conversation turns), procedural memory (how-tos), agent-state snapshots,
erasure. The tenant and user always come from the caller's token.

Size limits. Text fields carry ``max_length`` constraints. JSON values are
bounded by their encoded size, which the service checks (413 beyond it) with
the limits below, because measuring a JSON value inside a validator would mean
encoding it twice on every request:

- a working-memory value: :data:`WORKING_MEMORY_VALUE_MAX_BYTES` (1 MiB);
- a task or plan context: :data:`CONTEXT_MAX_BYTES` (4 MiB);
- an agent-state snapshot: :data:`SNAPSHOT_FULL_MAX_BYTES` (8 MiB) full and
  :data:`SNAPSHOT_SLIM_MAX_BYTES` (512 KiB) slim;
- metadata: at most 64 top-level keys, :data:`METADATA_MAX_BYTES` (64 KiB).

Optimistic concurrency: a record has a ``version`` (1 on creation, +1 per
write) and an ``etag`` (``"<version>"``, also sent as the ``ETag`` header). A
write with ``expected_version`` succeeds only if the stored version still
equals it (``0`` means "only if absent"), else 409; without it, last write wins.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Self

from pydantic import Field, JsonValue, StringConstraints, computed_field, model_validator

from disco_common._base import Body, Description, Metadata, Record, ShortText
from disco_common.ids import EventType, Id, TenantId, UtcDatetime
from disco_common.pagination import PageQuery
from disco_common.plans import PlanContextData, PlanStatus
from disco_common.tasks import TaskContextData

__all__ = [
    "CONTENT_MAX_CHARS",
    "CONTEXT_MAX_BYTES",
    "METADATA_MAX_BYTES",
    "SNAPSHOT_FULL_MAX_BYTES",
    "SNAPSHOT_SLIM_MAX_BYTES",
    "TTL_MAX_SECONDS",
    "WORKING_MEMORY_VALUE_MAX_BYTES",
    "AgentStateSnapshot",
    "AgentStateSnapshotPut",
    "AgentStateSnapshotSummary",
    "DeleteResult",
    "EmbeddingModelInfo",
    "EpisodicHit",
    "EpisodicRecentQuery",
    "EpisodicRole",
    "EpisodicSearchMode",
    "EpisodicSearchQuery",
    "EpisodicTurn",
    "EpisodicTurnCreate",
    "EpisodicTurnUpdate",
    "ErasureResult",
    "ErasureScope",
    "MemoryKey",
    "MemoryVisibility",
    "MetadataFilter",
    "PlanContextRecord",
    "PlanContextStore",
    "PlanCreate",
    "PlanListQuery",
    "PlanRecord",
    "PlanStatusUpdate",
    "Procedure",
    "ProcedureCreate",
    "ProcedureHit",
    "ProcedureListQuery",
    "ProcedureSearchQuery",
    "ProcedureUpdate",
    "SemanticHit",
    "SemanticMemoryRecord",
    "SemanticMemoryUpsert",
    "SemanticQuery",
    "SessionCreate",
    "SessionListQuery",
    "SessionRecord",
    "TaskContextRecord",
    "TaskContextStore",
    "WorkingMemoryEntry",
    "WorkingMemoryPut",
]

WORKING_MEMORY_VALUE_MAX_BYTES = 1024 * 1024
CONTEXT_MAX_BYTES = 4 * 1024 * 1024
SNAPSHOT_FULL_MAX_BYTES = 8 * 1024 * 1024
SNAPSHOT_SLIM_MAX_BYTES = 512 * 1024
METADATA_MAX_BYTES = 64 * 1024
CONTENT_MAX_CHARS = 32_000
TTL_MAX_SECONDS = 30 * 86_400
QUERY_TEXT_MAX_CHARS = 8000

MemoryKey = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_][A-Za-z0-9._:@-]*$"),
]
"""A working-memory key: letters, digits and ``._:@-`` (safe in a URL path segment)."""

_MetadataKey = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
]

MetadataFilter = Annotated[
    dict[_MetadataKey, str | int | float | bool | None],
    Field(
        max_length=20,
        description=(
            "Equality on top-level metadata keys, all of which must match, e.g. "
            '`{"source": "wiki", "year": 2024}`. Values are JSON scalars; a key with value '
            "null matches records where that key is null."
        ),
    ),
]
"""A small, safe metadata filter: ``{key: scalar}`` equality, ANDed (JSONB containment)."""

TtlSeconds = Annotated[int, Field(ge=1, le=TTL_MAX_SECONDS)]

_MAX_INTEGER = 2**31 - 1
"""The largest value of a Postgres ``integer`` column (versions, format versions): a
larger one is refused with the request (422), not by the database."""
_MAX_BIGINT = 2**63 - 1
"""The largest value of a Postgres ``bigint`` column (turn sequences)."""


class _Versioned(Record):
    version: int = Field(ge=1, description="1 on creation, +1 per write.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def etag(self) -> str:
        """The version as an HTTP entity tag (``"<version>"``)."""
        return f'"{self.version}"'


_EXPECTED_VERSION = Field(
    default=None,
    ge=0,
    le=_MAX_INTEGER,
    description="Write only if the stored version equals this (0: only if absent); else 409.",
)


# -- working memory ---------------------------------------------------------------


class WorkingMemoryPut(Body):
    """Write one key of a plan's working memory (``PUT /v1/memory/working/{plan_id}/{key}``)."""

    value: JsonValue = Field(description="Any JSON value, at most 1 MiB encoded.")
    ttl_seconds: TtlSeconds | None = Field(
        default=None, description="Forget the key this long after the write (kept if absent)."
    )
    expected_version: int | None = _EXPECTED_VERSION


class WorkingMemoryEntry(_Versioned):
    """One key of a plan's working memory."""

    plan_id: Id
    key: MemoryKey
    value: JsonValue
    expires_at: UtcDatetime | None = Field(default=None, description="When the key is forgotten.")
    created_at: UtcDatetime
    updated_at: UtcDatetime


# -- task and plan context --------------------------------------------------------


class TaskContextStore(Body):
    """Store a Worker's task context (``PUT /v1/memory/task-context/{task_id}``).

    The service indexes ``context.sub_tasks`` so that the task can be found by
    any of its sub-task ids.
    """

    context: TaskContextData = Field(description="The task context, at most 4 MiB encoded.")
    ttl_seconds: TtlSeconds | None = Field(
        default=None, description="Forget the context this long after the write."
    )
    expected_version: int | None = _EXPECTED_VERSION


class TaskContextRecord(_Versioned):
    """A stored task context."""

    task_id: Id
    plan_id: Id | None = None
    sub_task_ids: list[Id] = Field(
        default_factory=list, description="Indexed for by-subtask lookup."
    )
    context: TaskContextData
    expires_at: UtcDatetime | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime


class PlanContextStore(Body):
    """Store a Planner's plan context (``PUT /v1/memory/plan-context/{plan_id}``).

    The service indexes ``context.correlation_ids`` so that the plan can be
    found by the correlation id of any answer it is waiting for.
    """

    context: PlanContextData = Field(description="The plan context, at most 4 MiB encoded.")
    expected_version: int | None = _EXPECTED_VERSION


class PlanContextRecord(_Versioned):
    """A stored plan context."""

    plan_id: Id
    session_id: Id | None = None
    correlation_ids: list[Id] = Field(
        default_factory=list, description="Indexed for by-correlation lookup."
    )
    context: PlanContextData
    created_at: UtcDatetime
    updated_at: UtcDatetime


# -- plans and sessions -----------------------------------------------------------


class PlanCreate(Body):
    """Create a plan record (``POST /v1/memory/plans``)."""

    plan_id: Id | None = Field(default=None, description="Choose the id (generated if absent).")
    goal_event: EventType = Field(description="The goal request's event type.")
    goal_data: dict[str, JsonValue] = Field(default_factory=dict, description="The goal's data.")
    response_event: EventType = Field(description="The event type the result goes out as.")
    plan_type: EventType | None = Field(default=None, description="The plan type, if registered.")
    session_id: Id | None = Field(default=None, description="The session it belongs to.")
    parent_plan_id: Id | None = Field(default=None, description="The plan it is a sub-plan of.")
    status: PlanStatus = Field(default=PlanStatus.PENDING)


class PlanRecord(_Versioned):
    """A plan record."""

    plan_id: Id
    goal_event: EventType
    goal_data: dict[str, JsonValue] = Field(default_factory=dict)
    response_event: EventType
    plan_type: EventType | None = None
    status: PlanStatus
    status_reason: str | None = None
    session_id: Id | None = None
    parent_plan_id: Id | None = None
    user_id: Id
    created_at: UtcDatetime
    updated_at: UtcDatetime
    completed_at: UtcDatetime | None = Field(default=None, description="Set on completed/failed.")


class PlanStatusUpdate(Body):
    """Change a plan's status (``PATCH /v1/memory/plans/{plan_id}``)."""

    status: PlanStatus
    reason: str | None = Field(default=None, max_length=1000, description="Why (pause, failure).")
    expected_version: int | None = _EXPECTED_VERSION


class PlanListQuery(PageQuery):
    """Filters for listing plans (newest first)."""

    status: PlanStatus | None = None
    session_id: Id | None = None
    parent_plan_id: Id | None = None


class SessionCreate(Body):
    """Create a session (``POST /v1/memory/sessions``): a conversation grouping plans."""

    session_id: Id | None = Field(default=None, description="Choose the id (generated if absent).")
    name: str | None = Field(default=None, max_length=200)
    metadata: Metadata = Field(default_factory=dict)


class SessionRecord(Record):
    """A session with its activity."""

    session_id: Id
    name: str | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    user_id: Id
    plan_count: int = Field(ge=0, description="Plans created in this session.")
    created_at: UtcDatetime
    last_activity_at: UtcDatetime = Field(description="Last plan or turn in the session.")


class SessionListQuery(PageQuery):
    """Listing sessions (most recently active first)."""


# -- semantic memory --------------------------------------------------------------


class MemoryVisibility(StrEnum):
    """Who can read a memory."""

    PRIVATE = "private"
    """Only the user who wrote it."""
    PUBLIC = "public"
    """Every user of the tenant."""


class SemanticMemoryUpsert(Body):
    """Store a fact for similarity search (``PUT /v1/memory/semantic``).

    Upserts by ``external_id`` when given, else by the content's hash
    (``disco_common.text_hash``), so storing the same text twice keeps one memory.
    """

    content: str = Field(min_length=1, max_length=CONTENT_MAX_CHARS, description="The text.")
    external_id: Id | None = Field(default=None, description="Your id for it (upsert key).")
    visibility: MemoryVisibility = Field(default=MemoryVisibility.PRIVATE)
    metadata: Metadata = Field(default_factory=dict, description="Filterable attributes.")
    embedding: list[float] | None = Field(
        default=None,
        max_length=2000,
        description=(
            "Your own vector for the content (made with the deployment's model, see "
            "`GET /v1/memory/semantic/model`); the service embeds the content when absent."
        ),
    )


class SemanticMemoryRecord(Record):
    """A stored semantic memory (its vector stays in the service)."""

    memory_id: Id
    external_id: Id | None = None
    content: str
    content_hash: str = Field(description="SHA-256 of the content (UTF-8).")
    visibility: MemoryVisibility
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    user_id: Id
    created_at: UtcDatetime
    updated_at: UtcDatetime


class SemanticQuery(Body):
    """Find memories similar to a text (``POST /v1/memory/semantic/query``).

    Give ``text`` (embedded by the service) or ``embedding`` (your own vector).
    """

    text: str | None = Field(
        default=None, min_length=1, max_length=QUERY_TEXT_MAX_CHARS, description="What to look for."
    )
    embedding: list[float] | None = Field(
        default=None, max_length=2000, description="Look for this vector instead of a text."
    )
    limit: int = Field(default=10, ge=1, le=100)
    threshold: float | None = Field(
        default=None, ge=-1.0, le=1.0, description="Only hits with at least this cosine similarity."
    )
    filter: MetadataFilter = Field(default_factory=dict)
    include_public: bool = Field(
        default=True, description="Also search the tenant's public memories."
    )

    @model_validator(mode="after")
    def _text_or_embedding(self) -> Self:
        if (self.text is None) == (self.embedding is None):
            raise ValueError("give exactly one of `text` and `embedding`")
        return self


class EmbeddingModelInfo(Record):
    """The model that embeds memories in this deployment (``GET /v1/memory/semantic/model``)."""

    model: str = Field(description="The model's name.")
    dimensions: int = Field(ge=1, description="The length of its vectors.")


class SemanticHit(Record):
    """A memory and how similar it is to the query."""

    record: SemanticMemoryRecord
    score: float = Field(description="Cosine similarity, higher is closer (at most 1).")


# -- episodic memory --------------------------------------------------------------


class EpisodicRole(StrEnum):
    """Who spoke a turn."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class EpisodicTurnCreate(Body):
    """Append a conversation turn (``POST /v1/memory/episodic``)."""

    session_id: Id = Field(description="The conversation.")
    agent_id: Id = Field(
        description="The agent in the conversation (a stable id; agents usually use their name)."
    )
    role: EpisodicRole
    content: str = Field(max_length=CONTENT_MAX_CHARS)
    plan_id: Id | None = None
    task_id: Id | None = None
    metadata: Metadata = Field(default_factory=dict)


class EpisodicTurnUpdate(Body):
    """Correct a stored turn (``PATCH /v1/memory/episodic/{turn_id}``); only the fields given
    change. New content is embedded again, so search finds the turn by what it says now."""

    content: str | None = Field(default=None, max_length=CONTENT_MAX_CHARS)
    metadata: Metadata | None = None

    @model_validator(mode="after")
    def _changes_something(self) -> Self:
        if not self.model_fields_set:
            raise ValueError("give at least one field to change (content, metadata)")
        if "content" in self.model_fields_set and self.content is None:
            raise ValueError("content cannot be null; give the new text")
        return self


class EpisodicTurn(Record):
    """A stored conversation turn."""

    turn_id: Id
    session_id: Id
    agent_id: Id
    role: EpisodicRole
    content: str
    plan_id: Id | None = None
    task_id: Id | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    user_id: Id
    sequence: int = Field(ge=1, description="Order within the session, increasing.")
    created_at: UtcDatetime


class EpisodicRecentQuery(Body):
    """The last turns of a session (oldest first in the answer)."""

    session_id: Id
    agent_id: Id | None = Field(default=None, description="Only this agent's conversation.")
    limit: int = Field(default=20, ge=1, le=200)
    before_sequence: int | None = Field(
        default=None,
        ge=1,
        le=_MAX_BIGINT,
        description="Only turns before this sequence (to page backwards).",
    )


class EpisodicSearchMode(StrEnum):
    """How episodic search scores a turn."""

    SEMANTIC = "semantic"
    """Cosine similarity of meaning."""
    TEXT = "text"
    """Full-text match of the words (score ``rank / (1 + rank)``, in [0, 1))."""
    HYBRID = "hybrid"
    """``0.7 * semantic + 0.3 * text``: meaning first, exact words break ties."""


class EpisodicSearchQuery(Body):
    """Search turns by meaning and text."""

    text: str = Field(min_length=1, max_length=QUERY_TEXT_MAX_CHARS)
    mode: EpisodicSearchMode = Field(default=EpisodicSearchMode.HYBRID)
    session_id: Id | None = Field(default=None, description="Within one session (all if absent).")
    agent_id: Id | None = None
    role: EpisodicRole | None = None
    limit: int = Field(default=10, ge=1, le=100)
    threshold: float | None = Field(default=None, ge=-1.0, le=1.0)


class EpisodicHit(Record):
    """A turn and how well it matches the search."""

    turn: EpisodicTurn
    score: float


# -- procedural memory ------------------------------------------------------------


class ProcedureCreate(Body):
    """Store a procedure: what to do in a situation (``POST /v1/memory/procedural``)."""

    name: ShortText = Field(description="Short name, e.g. `refund a duplicate charge`.")
    trigger: Description = Field(
        min_length=1, description="The situation it applies to (what search matches against)."
    )
    steps: list[Annotated[str, StringConstraints(min_length=1, max_length=4000)]] = Field(
        default_factory=list, max_length=100, description="Ordered steps."
    )
    instructions: str = Field(
        default="", max_length=CONTENT_MAX_CHARS, description="Free-form instructions."
    )
    agent_id: Id | None = Field(default=None, description="The agent it is for (all if absent).")
    visibility: MemoryVisibility = Field(default=MemoryVisibility.PRIVATE)
    metadata: Metadata = Field(default_factory=dict)

    @model_validator(mode="after")
    def _has_content(self) -> Self:
        if not self.steps and not self.instructions:
            raise ValueError("a procedure needs steps or instructions")
        return self


class ProcedureUpdate(Body):
    """Change a procedure; only the fields given change."""

    name: ShortText | None = None
    trigger: Description | None = Field(default=None, min_length=1)
    steps: list[Annotated[str, StringConstraints(min_length=1, max_length=4000)]] | None = Field(
        default=None, max_length=100
    )
    instructions: str | None = Field(default=None, max_length=CONTENT_MAX_CHARS)
    agent_id: Id | None = None
    visibility: MemoryVisibility | None = None
    metadata: Metadata | None = None
    expected_version: int | None = _EXPECTED_VERSION

    @model_validator(mode="after")
    def _changes_something(self) -> Self:
        if not self.model_fields_set - {"expected_version"}:
            raise ValueError("give at least one field to change")
        return self


class Procedure(_Versioned):
    """A stored procedure."""

    procedure_id: Id
    name: str
    trigger: str
    steps: list[str] = Field(default_factory=list)
    instructions: str = ""
    agent_id: Id | None = None
    visibility: MemoryVisibility
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    user_id: Id
    created_at: UtcDatetime
    updated_at: UtcDatetime


class ProcedureListQuery(PageQuery):
    """Filters for listing procedures."""

    agent_id: Id | None = None


class ProcedureSearchQuery(Body):
    """Find the procedures most relevant to a situation."""

    situation: str = Field(min_length=1, max_length=QUERY_TEXT_MAX_CHARS)
    agent_id: Id | None = None
    limit: int = Field(default=5, ge=1, le=50)
    threshold: float | None = Field(default=None, ge=-1.0, le=1.0)


class ProcedureHit(Record):
    """A procedure and how relevant it is."""

    procedure: Procedure
    score: float


# -- agent-state snapshots --------------------------------------------------------


class AgentStateSnapshotPut(Body):
    """Store the latest state of an agent in a session
    (``PUT /v1/memory/snapshots/{session_id}/{agent_id}``).

    ``full`` is the lossless serialization, ``slim`` the bounded one for UIs and
    cheap reads; both are stored side by side and replace the previous snapshot.
    """

    full: dict[str, JsonValue] = Field(description="Lossless state, at most 8 MiB encoded.")
    slim: dict[str, JsonValue] = Field(description="Slim state, at most 512 KiB encoded.")
    execution_id: Id | None = None
    status: str | None = Field(default=None, max_length=50, description="The agent's status.")
    format_version: int = Field(
        default=1, ge=1, le=_MAX_INTEGER, description="The serializer's format version."
    )
    expected_version: int | None = _EXPECTED_VERSION


class AgentStateSnapshotSummary(_Versioned):
    """A snapshot without its full state (what listing a session returns)."""

    session_id: Id
    agent_id: Id
    execution_id: Id | None = None
    status: str | None = None
    format_version: int = 1
    slim: dict[str, JsonValue]
    full_bytes: int = Field(ge=0, description="Encoded size of the full state.")
    slim_bytes: int = Field(ge=0, description="Encoded size of the slim state.")
    created_at: UtcDatetime
    updated_at: UtcDatetime


class AgentStateSnapshot(AgentStateSnapshotSummary):
    """A snapshot with its full state."""

    full: dict[str, JsonValue]


# -- deletes --------------------------------------------------------------------


class DeleteResult(Record):
    """How many records a bulk delete removed."""

    deleted: int = Field(ge=0)


# -- erasure ----------------------------------------------------------------------


class ErasureScope(StrEnum):
    """What an erasure removed."""

    USER = "user"
    TENANT = "tenant"


class ErasureResult(Record):
    """What an erasure deleted, in one transaction."""

    scope: ErasureScope
    tenant_id: TenantId
    user_id: Id | None = Field(default=None, description="Set for a user erasure.")
    deleted: dict[str, int] = Field(description="Rows deleted per table.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> int:
        """Rows deleted in all."""
        return sum(self.deleted.values())
