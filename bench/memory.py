"""Benchmark: the memory service — semantic query at 100,000 memories, working memory rates.

    uv run python bench/memory.py [--memories 100000] [--queries 300] [--seconds 5]
                                  [--concurrency 16] [--ef-search 64] [--m 16]
                                  [--ef-construction 64]

Starts an embedded PostgreSQL (pgvector) and Tansu broker on free loopback
ports unless ``DISCO_DATABASE_ADMIN_URL`` / ``DISCO_KAFKA_BOOTSTRAP`` name
existing ones (a fresh database is created and migrated either way), then
runs the memory service as a real ``python -m disco_memory`` subprocess
(uvicorn, one process, the bundled embedding model) and drives it over
loopback with keep-alive connections. Everything shares the machine's cores.

Seeding: ``--memories`` semantic memories of one user (one tenant: every row
passes the tenant filter, the worst case for the index walk), inserted with
COPY. Their vectors are synthetic but shaped like real embeddings: 384
dimensions, unit length, clustered around 2,000 topics (real sentence
embeddings cluster; uniform random vectors would be an unrealistically hard
case for any ANN index). The HNSW index is built after the load
(``--m``/``--ef-construction``) and the build time printed.

Figures (one request at a time unless said otherwise):

- query embedding: the bundled model embedding a short question (in this
  process, one thread, as the service does);
- raw SQL: the service's own similarity query, sent with asyncpg as the
  application role inside a transaction with the same tenant settings and HNSW
  options (what the service does, minus HTTP, auth and JSON);
- API by vector: ``POST /v1/memory/semantic/query`` with ``embedding`` given —
  the API overhead over the raw query (the two alternate on the same vectors,
  each side first for half of them: the second walk of a vector's part of the
  graph finds its pages in shared buffers);
- API by text: the same with ``text`` (embedding + query + API), every text a
  new one; and with a repeated question (the service keeps an LRU cache of
  recent query embeddings);
- recall@10 of the HNSW walk against an exact scan, for the same queries;
- working memory ``PUT`` and ``GET`` requests/s with ``--concurrency`` in flight.

Targets (issue 4): API p99 < 50 ms at 100k memories; API overhead within 2x
of the raw query.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import uvloop
from _common import (
    LeanHttp,
    LeanResponse,
    create_database,
    percentile,
    serve_bare,
    start_service,
    wait_ready,
)
from pgvector.asyncpg import register_vector

from disco._dev.broker import EmbeddedBroker
from disco._dev.dburl import with_database, with_user
from disco._dev.migrate import upgrade
from disco._dev.ports import free_port
from disco._dev.postgres import EmbeddedPostgres
from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco_common.auth import Role
from disco_memory.embeddings import EmbeddingPurpose, LocalEmbeddingProvider
from disco_memory.semantic.repository import _QUERY
from disco_service import driver_sql

TENANT = "bench"
USER = "bench"
DIMENSIONS = 384
TOPICS = 2000
QUESTIONS = [
    "How do I reset my password?",
    "What is our refund policy for damaged goods?",
    "When does the Berlin office open on Mondays?",
    "Which customers asked about invoices last week?",
    "What did the user say about the shipping delay?",
    "How should I escalate a production outage?",
    "What are the side effects of the new medication?",
    "Summarise the discussion about quarterly revenue.",
]


def question(index: int) -> str:
    """A short question, different for every index."""
    return f"{QUESTIONS[index % len(QUESTIONS)]} (case {index})"


def line(label: str, samples: list[float], extra: str = "") -> None:
    print(
        f"{label:<40} p50 {percentile(samples, 0.50) * 1000:7.2f} ms   "
        f"p99 {percentile(samples, 0.99) * 1000:7.2f} ms   "
        f"mean {statistics.fmean(samples) * 1000:7.2f} ms   ({len(samples)} samples){extra}"
    )


def clustered_vectors(count: int, rng: np.random.Generator, centers: np.ndarray) -> np.ndarray:
    topics = rng.integers(0, len(centers), size=count)
    vectors = centers[topics] + rng.normal(0, 0.045, size=(count, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


def literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in vector) + "]"


async def seed(
    admin_url: str,
    count: int,
    m: int,
    ef_construction: int,
    rng: np.random.Generator,
    centers: np.ndarray,
) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute("DROP INDEX IF EXISTS memory.semantic_embedding")
        started = time.perf_counter()
        batch = 20_000
        for offset in range(0, count, batch):
            n = min(batch, count - offset)
            vectors = clustered_vectors(n, rng, centers)
            buffer = io.StringIO()
            for i, vector in enumerate(vectors):
                index = offset + i
                content = f"synthetic memory {index} about topic {index % TOPICS}"
                buffer.write(
                    f"{uuid.uuid4()}\t{TENANT}\t{USER}\t{content}\t{index:064x}\tf\t"
                    f'{{"topic": {index % TOPICS}}}\t{literal(vector)}\tsynthetic\n'
                )
            await conn.copy_to_table(
                "semantic_memories",
                schema_name="memory",
                source=io.BytesIO(buffer.getvalue().encode()),
                columns=[
                    "memory_id", "tenant_id", "user_id", "content", "content_hash",
                    "is_public", "metadata", "embedding", "embedding_model",
                ],
                format="text",
            )  # fmt: skip
        loaded = time.perf_counter() - started
        print(f"loaded {count:,} memories with COPY in {loaded:.1f} s ({count / loaded:,.0f}/s)")
        await conn.execute("SET maintenance_work_mem = '1GB'")
        await conn.execute("SET max_parallel_maintenance_workers = 1")
        started = time.perf_counter()
        await conn.execute(
            "CREATE INDEX semantic_embedding ON memory.semantic_memories "
            "USING hnsw (embedding vector_cosine_ops) "
            f"WITH (m = {m}, ef_construction = {ef_construction})"
        )
        print(
            f"built the HNSW index (m={m}, ef_construction={ef_construction}) in "
            f"{time.perf_counter() - started:.1f} s"
        )
        await conn.execute("ANALYZE memory.semantic_memories")
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()


# Exact answers for recall: the nearest memories by a full scan (no index).
_EXACT = (
    "SELECT memory_id FROM memory.semantic_memories "
    "WHERE tenant_id = $1 AND (user_id = $2 OR is_public) "
    "ORDER BY embedding <=> $3 LIMIT $4"
)


class RawQuery:
    """The service's own query statement with asyncpg on one connection.

    Like with like: the same statement the service sends, the same way (one
    statement, its own transaction, the tenant scope set by the statement), with
    the same connection settings (binary vectors, HNSW options set once per
    connection).
    """

    def __init__(self, conn: asyncpg.Connection, statement: Any, names: list[str]) -> None:
        self.conn = conn
        self._statement = statement
        self._names = names

    @classmethod
    async def open(cls, app_url: str, ef_search: int) -> RawQuery:
        sql, names = driver_sql(_QUERY)
        conn = await asyncpg.connect(app_url)
        await register_vector(conn)
        await conn.execute(
            f"SET hnsw.ef_search = {int(ef_search)}; SET hnsw.iterative_scan = 'relaxed_order'"
        )
        return cls(conn, await conn.prepare(sql), names)

    async def nearest(self, vector: np.ndarray, limit: int) -> list[str]:
        """The ids of the nearest memories, as the service finds them."""
        values = {
            "tenant_id": TENANT, "user_id": USER, "limit": limit, "embedding": vector,
            "threshold": None, "filter": "{}", "include_public": True, "ef_search": None,
        }  # fmt: skip
        rows = await self._statement.fetch(*[values[name] for name in self._names])
        return [row["memory_id"] for row in rows]

    async def exact(self, vector: np.ndarray, limit: int) -> list[str]:
        """The ids of the nearest memories by a full scan (no index), for recall."""
        async with self.conn.transaction():
            await self.conn.execute(
                "SELECT set_config('disco.tenant_id', $1, true), "
                "set_config('disco.user_id', $2, true), "
                "set_config('enable_indexscan', 'off', true)",
                TENANT, USER,
            )  # fmt: skip
            rows = await self.conn.fetch(_EXACT, TENANT, USER, vector, limit)
        return [row["memory_id"] for row in rows]


async def serve_floor(app_url: str, ef_search: int, port: int) -> None:
    """The service's statement behind the least HTTP a Python service adds: a bare ASGI
    app (:func:`_common.serve_bare`), ``json`` for the body and the answer (the ids
    only), no auth, one :class:`RawQuery` connection."""
    raw = await RawQuery.open(app_url, ef_search)

    async def nearest(body: bytes) -> tuple[int, bytes]:
        query = json.loads(body)
        vector = np.asarray(query["embedding"], dtype=np.float32)
        return 200, json.dumps(await raw.nearest(vector, query["limit"])).encode()

    await serve_bare(port, nearest)


async def raw_queries(
    app_url: str, vectors: list[np.ndarray], ef_search: int, limit: int
) -> tuple[list[float], list[float], list[list[str]], list[list[str]]]:
    """:class:`RawQuery` for each vector, one at a time. Returns (query times,
    transaction times, approximate answers, exact answers); both times are the one
    round trip."""
    raw = await RawQuery.open(app_url, ef_search)
    query_times: list[float] = []
    approximate: list[list[str]] = []
    try:
        for vector in vectors:
            started = time.perf_counter()
            approximate.append(await raw.nearest(vector, limit))
            query_times.append(time.perf_counter() - started)
        exact = [await raw.exact(vector, limit) for vector in vectors[:50]]
    finally:
        await raw.conn.close()
    return query_times, list(query_times), approximate, exact


async def timed(calls: int, make_call: Callable[[int], Awaitable[LeanResponse]]) -> list[float]:
    samples: list[float] = []
    for index in range(calls):
        started = time.perf_counter()
        response = await make_call(index)
        samples.append(time.perf_counter() - started)
        if response.status_code >= 400:
            raise RuntimeError(f"{response.status_code}: {response.text[:300]}")
    return samples


async def rate(
    label: str, seconds: float, concurrency: int, make_call: Callable[[], Awaitable[LeanResponse]]
) -> None:
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal errors
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            response = await make_call()
            latencies.append(time.perf_counter() - started)
            errors += response.status_code >= 400

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    print(
        f"{label:<40} {len(latencies) / elapsed:>7,.0f} req/s   "
        f"p50 {percentile(latencies, 0.5) * 1000:6.2f} ms   "
        f"p99 {percentile(latencies, 0.99) * 1000:6.2f} ms   ({len(latencies):,} requests, "
        f"{errors} errors, {concurrency} in flight)"
    )


async def bench(args: argparse.Namespace, admin_url: str, app_url: str, bootstrap: str) -> None:
    rng = np.random.default_rng(11)
    centers = rng.normal(size=(TOPICS, DIMENSIONS)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    await seed(admin_url, args.memories, args.m, args.ef_construction, rng, centers)
    query_vectors = list(clustered_vectors(args.queries, rng, centers))

    # -- query embedding -------------------------------------------------------------
    provider = LocalEmbeddingProvider(threads=1)
    await provider.start()
    embed_times: list[float] = []
    for index in range(args.queries):
        started = time.perf_counter()
        await provider.embed([question(index)], purpose=EmbeddingPurpose.QUERY)
        embed_times.append(time.perf_counter() - started)
    await provider.stop()

    # -- raw SQL ----------------------------------------------------------------------
    _, _, approximate, exact = await raw_queries(app_url, query_vectors, args.ef_search, 10)
    recall = statistics.fmean(
        len(set(a) & set(e)) / max(1, len(e)) for a, e in zip(approximate, exact, strict=False)
    )

    # -- the service --------------------------------------------------------------------
    process, base_url = start_service(
        "memory",
        app_url,
        bootstrap,
        f"bench{uuid.uuid4().hex[:6]}.",
        DISCO_MEMORY_HNSW_EF_SEARCH=str(args.ef_search),
        DISCO_DATABASE_POOL_SIZE=str(args.concurrency),
    )
    try:
        await wait_ready("memory service", base_url, process, limit_seconds=90)
        token = mint_dev_token(DEV_AUTH_SECRET, TENANT, USER, (Role.USER,), 3600)
        # A lean client, as the raw side uses asyncpg: httpx would add more
        # CPU per request than the service spends (see bench/_common.py).
        lean = LeanHttp([base_url], {"Authorization": f"Bearer {token}"}, connections=64)
        try:
            vectors_json = [[float(x) for x in v] for v in query_vectors]
            warm = [
                lean.json("POST", "/v1/memory/semantic/query", {"embedding": vectors_json[0]})
                for _ in range(20)
            ]
            for call in warm:
                await call
            # The API and the raw query alternate on the same vectors, each side first
            # for half of them: the second walk of a vector's part of the graph finds
            # its pages in shared buffers, and both see the same load meanwhile.
            raw = await RawQuery.open(app_url, args.ef_search)
            by_vector: list[float] = []
            transaction_times: list[float] = []
            try:
                for index in range(args.queries):
                    for side in (index % 2, 1 - index % 2):
                        started = time.perf_counter()
                        if side:
                            await raw.nearest(query_vectors[index], 10)
                            transaction_times.append(time.perf_counter() - started)
                            continue
                        response = await lean.json(
                            "POST",
                            "/v1/memory/semantic/query",
                            {"embedding": vectors_json[index], "limit": 10},
                        )
                        by_vector.append(time.perf_counter() - started)
                        if response.status_code >= 400:
                            raise RuntimeError(f"{response.status_code}: {response.text[:300]}")
            finally:
                await raw.conn.close()
            # Distinct texts: the service caches recent query embeddings, so a
            # repeated question would not pay for the model.
            by_text = await timed(
                args.queries,
                lambda i: lean.json(
                    "POST",
                    "/v1/memory/semantic/query",
                    {"text": question(i), "limit": 10},
                ),
            )
            repeated = await timed(
                args.queries,
                lambda i: lean.json(
                    "POST",
                    "/v1/memory/semantic/query",
                    {"text": question(i % 8), "limit": 10},
                ),
            )

            print()
            print(
                f"semantic query at {args.memories:,} memories "
                f"(one at a time, limit 10, ef_search {args.ef_search})"
            )
            line("query embedding (bundled e5-small)", embed_times)
            line("raw SQL: the service's statement", transaction_times)
            line("API by vector (HTTP, auth, RLS, JSON)", by_vector)
            line("API by text (embedding + query + API)", by_text)
            line("API by text, repeated question (cached)", repeated)
            print(f"{'recall@10 of HNSW vs exact scan':<40} {recall:.3f} (50 queries)")
            overhead = percentile(by_vector, 0.99) / percentile(transaction_times, 0.99)
            print(
                f"{'API p99 / raw transaction p99':<40} {overhead:.2f}x   "
                f"(p50 {percentile(by_vector, 0.5) / percentile(transaction_times, 0.5):.2f}x)"
            )

            print()
            vector_index = iter(range(10**9))
            await rate(
                "API by vector, concurrent",
                args.seconds,
                8,
                lambda: lean.json(
                    "POST",
                    "/v1/memory/semantic/query",
                    {"embedding": vectors_json[next(vector_index) % len(vectors_json)]},
                ),
            )

            plan = f"plan-{uuid.uuid4().hex[:8]}"
            keys = [f"key-{n}" for n in range(1000)]
            random_key = random.Random(3)
            # Every key exists before the GET phase, so each GET is a hit.
            for start in range(0, len(keys), args.concurrency):
                await asyncio.gather(
                    *(
                        lean.json("PUT", f"/v1/memory/working/{plan}/{key}", {"value": 0})
                        for key in keys[start : start + args.concurrency]
                    )
                )
            value = {"draft": "x" * 200, "step": 3}
            await rate(
                "working memory PUT",
                args.seconds,
                args.concurrency,
                lambda: lean.json(
                    "PUT", f"/v1/memory/working/{plan}/{random_key.choice(keys)}", {"value": value}
                ),
            )
            await rate(
                "working memory GET",
                args.seconds,
                args.concurrency,
                lambda: lean.request("GET", f"/v1/memory/working/{plan}/{random_key.choice(keys)}"),
            )
        finally:
            await lean.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--ef-search", type=int, default=64)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--serve-bare", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare:
        app_url, ef_search, port = args.serve_bare
        uvloop.run(serve_floor(app_url, int(ef_search), int(port)))
        return

    with tempfile.TemporaryDirectory(prefix="disco-bench-memory-") as folder:
        postgres: EmbeddedPostgres | None = None
        broker: EmbeddedBroker | None = None
        try:
            server_url = os.environ.get("DISCO_DATABASE_ADMIN_URL")
            if not server_url:
                postgres = EmbeddedPostgres(
                    data_dir=Path(folder) / "pg",
                    port=free_port(),
                    log_path=Path(folder) / "postgres.log",
                    durable=False,
                )
                postgres.start()
                server_url = postgres.dsn("postgres")
            bootstrap = os.environ.get("DISCO_KAFKA_BOOTSTRAP")
            if not bootstrap:
                broker = EmbeddedBroker(port=free_port(), log_path=Path(folder) / "broker.log")
                broker.start()
                bootstrap = broker.bootstrap
            name = f"disco_bench_{uuid.uuid4().hex[:8]}"
            asyncio.run(create_database(server_url, name))
            admin_url = with_database(server_url, name)
            app_url = with_user(admin_url, "disco_app", "disco_app")
            upgrade(admin_url, app_url, services=("memory",))
            asyncio.run(bench(args, admin_url, app_url, bootstrap))
        finally:
            if broker is not None:
                broker.stop()
            if postgres is not None:
                postgres.destroy()


if __name__ == "__main__":
    main()
