"""Start-up checks: the vector columns fit the embedding model."""

from __future__ import annotations

import re

import structlog
from sqlalchemy import text

from disco_memory.embeddings import EmbeddingProvider
from disco_memory.hnsw import HNSW_INDEXES, index_options, rebuild_statements
from disco_service import Database

__all__ = [
    "VECTOR_COLUMNS",
    "VectorDimensionMismatch",
    "check_hnsw_options",
    "check_vector_columns",
]

log = structlog.get_logger("disco_memory")

_INDEX_OPTIONS = text(
    "SELECT c.relname AS name, c.reloptions AS options FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'memory' AND c.relname = ANY(:names)"
)

VECTOR_COLUMNS = ("semantic_memories", "episodic_turns", "procedures")

_COLUMN_TYPES = text(
    """
    SELECT c.relname AS table_name, format_type(a.atttypid, a.atttypmod) AS column_type
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'memory' AND a.attname = 'embedding' AND NOT a.attisdropped
    """
)
_VECTOR = re.compile(r"^vector\((\d+)\)$")


class VectorDimensionMismatch(RuntimeError):
    """The database stores vectors of another dimension than the model makes."""


async def check_vector_columns(database: Database, embedder: EmbeddingProvider) -> None:
    """Refuse to start unless every embedding column has the model's dimension.

    Raises:
        VectorDimensionMismatch: a column is missing or of another dimension.
    """
    async with database.unit_of_work(None) as session:
        rows = (await session.execute(_COLUMN_TYPES)).mappings().all()
    found = {row["table_name"]: row["column_type"] for row in rows}
    for table in VECTOR_COLUMNS:
        column_type = found.get(table)
        if column_type is None:
            raise VectorDimensionMismatch(
                f"memory.{table}.embedding is missing: run the migrations (`disco db upgrade`)"
            )
        match = _VECTOR.fullmatch(column_type)
        dimensions = int(match.group(1)) if match else None
        if dimensions != embedder.dimensions:
            raise VectorDimensionMismatch(
                f"memory.{table}.embedding is {column_type} but the embedding model "
                f"{embedder.model_name} makes {embedder.dimensions}-dimensional vectors. The "
                "dimension is fixed when the migration creates the tables "
                "(DISCO_MEMORY_EMBEDDING_DIMENSIONS): configure a model of that dimension, or "
                "migrate a new database with the model's dimension and re-store the memories"
            )


async def check_hnsw_options(database: Database, *, m: int, ef_construction: int) -> list[str]:
    """Warn (and return the indexes) when an HNSW index was built with other options
    than ``DISCO_MEMORY_HNSW_M`` / ``DISCO_MEMORY_HNSW_EF_CONSTRUCTION``.

    The service does not rebuild an index itself (it is not the schema's owner and a
    rebuild blocks writes): the warning carries the statements to run.
    """
    async with database.unit_of_work(None) as session:
        rows = (
            await session.execute(_INDEX_OPTIONS, {"names": [i.name for i in HNSW_INDEXES]})
        ).all()
    built = {row.name: index_options(row.options) for row in rows}
    differing = []
    for index in HNSW_INDEXES:
        options = built.get(index.name)
        if options is not None and options != (m, ef_construction):
            differing.append(index.name)
            log.warning(
                "hnsw_index_options_differ",
                index=f"memory.{index.name}",
                built={"m": options[0], "ef_construction": options[1]},
                configured={"m": m, "ef_construction": ef_construction},
                rebuild="; ".join(rebuild_statements(index, (m, ef_construction))),
            )
    return differing
