"""Push notification configurations in Postgres, behind the a2a-sdk's store interface.

Tenant-scoped like the tasks (row-level security; the tenant from the token,
never from the config's own ``tenant`` field), and owned by the user who set
them: a caller reads and deletes only its own; every one of them gets the task's
notifications (``push.sender``).
"""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.server.tasks.push_notification_config_store import (
    PushNotificationConfigStore,
    normalize_push_notification_config,
)
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from google.protobuf.json_format import MessageToDict, ParseDict

from disco_gateway.push.repository import PushConfigRepository
from disco_gateway.scope import CallScope
from disco_gateway.tasks.store import PostgresTaskStore
from disco_service import Database

__all__ = ["PostgresPushConfigStore"]


def _config_of(document: dict[str, object]) -> TaskPushNotificationConfig:
    return ParseDict(document, TaskPushNotificationConfig(), ignore_unknown_fields=True)


class PostgresPushConfigStore(PushNotificationConfigStore):
    """Push configurations per task in ``gateway.a2a_push_configs``."""

    def __init__(self, database: Database, tasks: PostgresTaskStore) -> None:
        self._database = database
        self._tasks = tasks

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        scope = CallScope.of(context)
        config = normalize_push_notification_config(task_id, notification_config)
        config.ClearField("tenant")  # the tenant is the token's, not the body's
        async with self._database.unit_of_work(scope.tenant_id, scope.user_id) as session:
            await PushConfigRepository(session, scope.tenant_id).put(
                task_id, config.id, user_id=scope.user_id, config=MessageToDict(config)
            )
        self._tasks.note_pushes(scope.tenant_id, task_id, True)
        return config

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        scope = CallScope.of(context)
        return await self._list(scope, task_id, owner=None if scope.system else scope.user_id)

    async def _list(
        self, scope: CallScope, task_id: str, *, owner: str | None
    ) -> list[TaskPushNotificationConfig]:
        async with self._database.unit_of_work(scope.tenant_id, scope.user_id) as session:
            documents = await PushConfigRepository(session, scope.tenant_id).list(
                task_id, user_id=owner
            )
        return [_config_of(document) for document in documents]

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        scope = CallScope.of(context)
        async with self._database.unit_of_work(scope.tenant_id, scope.user_id) as session:
            await PushConfigRepository(session, scope.tenant_id).delete(
                task_id, config_id, user_id=None if scope.system else scope.user_id
            )
