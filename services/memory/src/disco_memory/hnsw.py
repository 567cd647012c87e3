"""HNSW build options of the vector indexes (``m``, ``ef_construction``).

Shared by the migration that applies them and the start-up check that compares
them with the indexes in the database. The per-query ``ef_search`` is a setting
of its own (``DISCO_MEMORY_HNSW_EF_SEARCH``), applied to every connection.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "HNSW_INDEXES",
    "HnswIndex",
    "check_build_options",
    "hnsw_build_options",
    "index_options",
    "rebuild_statements",
]

DEFAULT_M = 16
DEFAULT_EF_CONSTRUCTION = 64


@dataclass(frozen=True)
class HnswIndex:
    """One HNSW index: its name and table in schema ``memory``."""

    name: str
    table: str


HNSW_INDEXES = (
    HnswIndex("semantic_embedding", "semantic_memories"),
    HnswIndex("episodic_embedding", "episodic_turns"),
    HnswIndex("procedures_embedding", "procedures"),
)


def check_build_options(m: int, ef_construction: int) -> tuple[int, int]:
    """``(m, ef_construction)`` if pgvector accepts them, else ``ValueError``."""
    if not 2 <= m <= 100:
        raise ValueError(f"HNSW m={m} must be within 2..100")
    if not 4 <= ef_construction <= 1000 or ef_construction < 2 * m:
        raise ValueError(
            f"HNSW ef_construction={ef_construction} must be within 4..1000 and at least "
            f"2 * m ({2 * m})"
        )
    return m, ef_construction


def hnsw_build_options() -> tuple[int, int]:
    """``(m, ef_construction)`` from ``DISCO_MEMORY_HNSW_M`` / ``_EF_CONSTRUCTION``."""
    return check_build_options(
        int(os.environ.get("DISCO_MEMORY_HNSW_M", DEFAULT_M)),
        int(os.environ.get("DISCO_MEMORY_HNSW_EF_CONSTRUCTION", DEFAULT_EF_CONSTRUCTION)),
    )


def index_options(reloptions: Sequence[str] | None) -> tuple[int, int]:
    """``(m, ef_construction)`` of an index from its ``pg_class.reloptions``."""
    values = dict(option.split("=", 1) for option in reloptions or ())
    return (
        int(values.get("m", DEFAULT_M)),
        int(values.get("ef_construction", DEFAULT_EF_CONSTRUCTION)),
    )


def rebuild_statements(index: HnswIndex, options: tuple[int, int]) -> list[str]:
    """SQL that rebuilds ``index`` with ``options`` (as the schema's owner)."""
    m, ef_construction = options
    return [
        f"DROP INDEX IF EXISTS memory.{index.name}",
        f"CREATE INDEX {index.name} ON memory.{index.table} "
        f"USING hnsw (embedding vector_cosine_ops) WITH (m = {int(m)}, "
        f"ef_construction = {int(ef_construction)})",
    ]
