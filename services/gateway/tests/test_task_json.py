"""The store's task JSON is the same whether the history's JSON is made again or reused."""

from __future__ import annotations

from a2a.types import a2a_pb2
from google.protobuf.json_format import MessageToDict, ParseDict

from disco_gateway.tasks.store import task_json, task_of

TASK = {
    "id": "t1",
    "contextId": "c1",
    "status": {
        "state": "TASK_STATE_COMPLETED",
        "timestamp": "2026-01-02T03:04:05.678Z",
        "message": {"messageId": "s1", "role": "ROLE_AGENT", "parts": [{"text": "done"}]},
    },
    "artifacts": [
        {"artifactId": "a1", "name": "result", "parts": [{"data": {"greeting": "Hello, Ada"}}]},
        {"artifactId": "a2", "parts": [{"text": "Hello, Ada"}]},
    ],
    "history": [
        {
            "messageId": "m1",
            "taskId": "t1",
            "contextId": "c1",
            "role": "ROLE_USER",
            "parts": [{"data": {"name": "Ada", "tags": [1, 2.5, None, True]}}],
        }
    ],
    "metadata": {"k": "v"},
}


def test_reused_history_gives_the_same_json() -> None:
    task = ParseDict(TASK, a2a_pb2.Task())
    history = [MessageToDict(message) for message in task.history]
    assert task_json(task, history) == task_json(task) == MessageToDict(task)
    assert task_of(task_json(task, history)) == task


def test_a_bare_task() -> None:
    task = a2a_pb2.Task(id="t2", context_id="c2")
    assert task_json(task, []) == MessageToDict(task)
