"""``TrackerClient``: the typed client of the tracker service (``/v1/tracker/...``).

Agents never report progress to the tracker over HTTP (it reads
``system-events``); they and the people behind them *read* from it. The
tenant always comes from the token (and, inside a bus handler, from the
envelope being handled).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

from disco.clients._base import ServiceClient, ServiceNotFoundError
from disco.clients._settings import ServiceClientSettings
from disco_common.pagination import Page
from disco_common.tracker import HumanInputWaitQuery, HumanInputWaitRecord, HumanInputWaitStatus

__all__ = ["TrackerClient"]

_HITL = "/v1/tracker/hitl"


class TrackerClient(ServiceClient):
    """Client of the tracker service: the questions to humans and where they stand.

    Use as ``async with TrackerClient.from_settings() as tracker: ...`` or
    ``start()``/``stop()``. Errors are :class:`~disco.clients.ServiceError`
    subclasses carrying the tracker's ``code``.

    Example — the inbox of a person or a UI::

        page = await tracker.list_questions(status="waiting")
        for question in page.items:
            print(question.correlation_id, question.question, question.deadline)
    """

    service_name = "tracker"

    @classmethod
    def _url(cls, settings: ServiceClientSettings) -> str:
        return settings.tracker_url  # DISCO_TRACKER_URL

    # -- questions to humans (HITL) ----------------------------------------------------

    async def list_questions(
        self,
        *,
        status: HumanInputWaitStatus | str | None = None,
        task_id: str | None = None,
        plan_id: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[HumanInputWaitRecord]:
        """One page of the tenant's questions to humans, oldest first.

        Args:
            status: only questions in this state (``waiting`` is the inbox of
                open questions, with or without a timeout).
            task_id, plan_id: only the questions of this task or plan.
            cursor: the ``next_cursor`` of the previous page.
            limit: questions per page (the tracker's default when omitted).

        Raises:
            ValueError: a filter is not valid (an unknown status, a bad limit), before
                anything is sent.
            ServiceValidationError: the tracker refused the query (e.g. a stale cursor).
        """
        fields: dict[str, object] = {
            "status": status,
            "task_id": task_id,
            "plan_id": plan_id,
            "cursor": cursor,
            "limit": limit,
        }
        query = HumanInputWaitQuery.model_validate(
            {key: value for key, value in fields.items() if value is not None}
        )
        return await self.call(
            "GET",
            _HITL,
            Page[HumanInputWaitRecord],
            params=query.model_dump(mode="json", exclude_none=True),
        )

    async def iter_questions(
        self,
        *,
        status: HumanInputWaitStatus | str | None = None,
        task_id: str | None = None,
        plan_id: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[HumanInputWaitRecord]:
        """Every question matching the filters, oldest first, fetching page after page."""
        cursor: str | None = None
        while True:
            page = await self.list_questions(
                status=status, task_id=task_id, plan_id=plan_id, cursor=cursor, limit=limit
            )
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def get_question(self, correlation_id: str) -> list[HumanInputWaitRecord]:
        """The question(s) with ``correlation_id`` (one per response event), or ``[]``.

        A question is waiting, answered, timed out, or answered late (after the
        timeout was published; the asker ignores such an answer).
        """
        try:
            return await self.call(
                "GET", f"{_HITL}/{quote(correlation_id, safe='')}", list[HumanInputWaitRecord]
            )
        except ServiceNotFoundError:
            return []
