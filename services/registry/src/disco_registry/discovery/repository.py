"""The discovery query: one statement over ``registry.agents`` and its live instances."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.registry import DiscoveryQuery
from disco_registry.agents.repository import like_pattern

__all__ = ["DiscoveryRepository"]

# Matching agents (GIN indexes do the filtering) with their live instance count,
# grouped by (tenant, name): one answer per agent name, described by its most
# recently updated matching registration, counting every live instance.
_TEMPLATE = """
WITH m AS (
    SELECT a.tenant_id, a.agent_id, a.name, a.updated_at, li.n, {score} AS score
    FROM registry.agents a
    CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM registry.agent_instances i
        WHERE i.tenant_id = a.tenant_id AND i.agent_id = a.agent_id AND i.expires_at > now()
    ) li
    WHERE {where} AND li.n > 0
), g AS (
    SELECT m.tenant_id, m.name,
           sum(m.n)::integer AS instance_count,
           array_agg(m.agent_id ORDER BY m.agent_id) AS agent_ids,
           max(m.score) AS score,
           (array_agg(m.agent_id ORDER BY m.updated_at DESC, m.agent_id))[1] AS representative
    FROM m
    GROUP BY m.tenant_id, m.name
    ORDER BY max(m.score) DESC NULLS LAST, (m.tenant_id = :tenant) DESC, m.name, m.tenant_id
    LIMIT :limit
)
-- The answer is built here as JSON text: discovery answers carry whole schemas,
-- and decoding, validating and re-encoding them in Python would cost more than
-- the query. The shape is DiscoveredAgent's (a test pins it).
SELECT coalesce(json_agg(json_build_object(
           'name', g.name,
           'description', a.description,
           'version', a.version,
           'tags', a.tags,
           'visibility', a.visibility,
           'instance_count', g.instance_count,
           'agent_ids', g.agent_ids,
           'capabilities', a.discovery,
           'score', g.score
       ) ORDER BY g.score DESC NULLS LAST, (g.tenant_id = :tenant) DESC, g.name, g.tenant_id),
       '[]')::text AS answer
FROM g
JOIN registry.agents a ON a.tenant_id = g.tenant_id AND a.agent_id = g.representative
"""


class DiscoveryRepository:
    """Runs discovery queries for the session's tenant."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def discover_json(self, *, tenant_id: str, query: DiscoveryQuery) -> str:
        """Live agents visible to the tenant that match every criterion of ``query``, as the
        JSON text of a list of :class:`DiscoveredAgent`."""
        clauses = ["(a.tenant_id = :tenant OR a.visibility = 'public')"]
        params: dict[str, Any] = {"tenant": tenant_id, "limit": query.limit}
        required = list(dict.fromkeys([*query.capabilities, *filter(None, [query.capability])]))
        if required:
            clauses.append("a.capability_names @> CAST(:capabilities AS text[])")
            params["capabilities"] = required
        if query.consumed_event is not None:
            clauses.append("a.consumed_events @> ARRAY[CAST(:consumed AS text)]")
            params["consumed"] = query.consumed_event
        if query.produced_event is not None:
            clauses.append("a.produced_events @> ARRAY[CAST(:produced AS text)]")
            params["produced"] = query.produced_event
        score = "NULL::real"
        if query.text is not None:
            clauses.append(
                "(a.search_vector @@ websearch_to_tsquery('english', :text) "
                "OR a.search_text ILIKE :like)"
            )
            # Full-text rank plus trigram word similarity: words match even when
            # only a part of a name or a misspelling was given.
            score = (
                "(ts_rank_cd(a.search_vector, websearch_to_tsquery('english', :text)) "
                "+ word_similarity(:text, a.search_text))::real"
            )
            params["text"] = query.text
            params["like"] = like_pattern(query.text)
        statement = text(_TEMPLATE.format(score=score, where=" AND ".join(clauses)))
        return str((await self._session.execute(statement, params)).scalar_one())
