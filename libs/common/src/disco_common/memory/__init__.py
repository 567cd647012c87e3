"""Memory service contracts (``/v1/memory/<family>``), one module per family.

Families: working memory (plan-scoped key/value with optimistic concurrency),
task context (lookup by sub-task id), plan context (lookup by correlation id),
plans and sessions, semantic memory (vectors), episodic memory
(conversation turns), procedural memory (how-tos), agent-state snapshots,
erasure (:mod:`~disco_common.memory.working`, :mod:`~disco_common.memory.task_context`,
:mod:`~disco_common.memory.plan_context`, :mod:`~disco_common.memory.plans`,
:mod:`~disco_common.memory.sessions`, :mod:`~disco_common.memory.semantic`,
:mod:`~disco_common.memory.episodic`, :mod:`~disco_common.memory.procedural`,
:mod:`~disco_common.memory.snapshots`, :mod:`~disco_common.memory.erasure`); every
name is importable from here too. The tenant and user always come from the
caller's token.

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

from disco_common.memory._shared import (
    CONTENT_MAX_CHARS,
    CONTEXT_MAX_BYTES,
    METADATA_MAX_BYTES,
    TTL_MAX_SECONDS,
    DeleteResult,
    MemoryVisibility,
    TtlSeconds,
)
from disco_common.memory.episodic import (
    EpisodicHit,
    EpisodicRecentQuery,
    EpisodicRole,
    EpisodicSearchMode,
    EpisodicSearchQuery,
    EpisodicTurn,
    EpisodicTurnCreate,
    EpisodicTurnUpdate,
)
from disco_common.memory.erasure import (
    ErasureResult,
    ErasureScope,
)
from disco_common.memory.plan_context import (
    PlanContextRecord,
    PlanContextStore,
)
from disco_common.memory.plans import (
    PlanCreate,
    PlanListQuery,
    PlanRecord,
    PlanStatusUpdate,
)
from disco_common.memory.procedural import (
    Procedure,
    ProcedureCreate,
    ProcedureHit,
    ProcedureListQuery,
    ProcedureSearchQuery,
    ProcedureUpdate,
)
from disco_common.memory.semantic import (
    EmbeddingModelInfo,
    MetadataFilter,
    SemanticHit,
    SemanticMemoryRecord,
    SemanticMemoryUpsert,
    SemanticQuery,
)
from disco_common.memory.sessions import (
    SessionCreate,
    SessionListQuery,
    SessionRecord,
)
from disco_common.memory.snapshots import (
    SNAPSHOT_FULL_MAX_BYTES,
    SNAPSHOT_SLIM_MAX_BYTES,
    AgentStateSnapshot,
    AgentStateSnapshotPut,
    AgentStateSnapshotSummary,
)
from disco_common.memory.task_context import (
    TaskContextRecord,
    TaskContextStore,
)
from disco_common.memory.working import (
    WORKING_MEMORY_VALUE_MAX_BYTES,
    MemoryKey,
    WorkingMemoryEntry,
    WorkingMemoryPut,
)

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
    "TtlSeconds",
    "WorkingMemoryEntry",
    "WorkingMemoryPut",
]
