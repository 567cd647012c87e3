"""Request models of the task-context routes not already in ``disco_common``."""

from __future__ import annotations

from disco_common.ids import Id
from disco_common.pagination import PageQuery

__all__ = ["TaskContextListQuery"]


class TaskContextListQuery(PageQuery):
    """Listing the task contexts of one plan (oldest first)."""

    plan_id: Id
