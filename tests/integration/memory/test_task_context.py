"""Task context: a Worker saves before delegating; any instance restores by sub-task id."""

from __future__ import annotations

import httpx

from disco_common.tasks import SubTaskInfo, TaskContextData
from tests.fixtures.waiting import eventually
from tests.integration.memory.conftest import error_code, new_id


def task_context(task_id: str, *sub_task_ids: str, plan_id: str | None = None) -> dict[str, object]:
    context = TaskContextData(
        task_id=task_id,
        event_type="analyze.requested",
        response_event="analyze.completed",
        plan_id=plan_id,
        data={"text": "hello"},
        sub_tasks={
            sub: SubTaskInfo(
                sub_task_id=sub, event_type="sentiment.analyze", response_event="sentiment.done"
            )
            for sub in sub_task_ids
        },
    )
    return {"context": context.model_dump(mode="json")}


async def test_a_saved_context_is_found_by_each_of_its_sub_task_ids(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    task, first, second = new_id("task"), new_id("sub"), new_id("sub")
    saved = await client.put(
        f"/v1/memory/task-context/{task}", json=task_context(task, first, second), headers=alice
    )

    by_first = await client.get(f"/v1/memory/task-context/by-subtask/{first}", headers=alice)
    by_second = await client.get(f"/v1/memory/task-context/by-subtask/{second}", headers=alice)

    assert saved.status_code == 200
    assert sorted(saved.json()["sub_task_ids"]) == sorted([first, second])
    assert by_first.json()["task_id"] == task
    assert by_second.json()["context"]["sub_tasks"][second]["event_type"] == "sentiment.analyze"


async def test_a_resave_replaces_the_sub_task_index(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    task, old, new = new_id("task"), new_id("sub"), new_id("sub")
    url = f"/v1/memory/task-context/{task}"
    await client.put(url, json=task_context(task, old), headers=alice)

    resaved = await client.put(url, json=task_context(task, new), headers=alice)

    assert resaved.json()["version"] == 2
    assert (
        await client.get(f"/v1/memory/task-context/by-subtask/{old}", headers=alice)
    ).status_code == 404
    assert (
        await client.get(f"/v1/memory/task-context/by-subtask/{new}", headers=alice)
    ).status_code == 200


async def test_the_correlation_id_of_a_question_to_a_human_finds_the_task(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    task, correlation = new_id("task"), new_id("ask")
    body = task_context(task)
    body["context"]["human_input"] = {  # type: ignore[index]
        "request_id": new_id("req"),
        "correlation_id": correlation,
        "response_event": "approval.given",
        "timeout_seconds": 60,
        "asked_at": "2026-01-01T00:00:00Z",
    }
    await client.put(f"/v1/memory/task-context/{task}", json=body, headers=alice)

    found = await client.get(f"/v1/memory/task-context/by-subtask/{correlation}", headers=alice)

    assert found.json()["task_id"] == task


async def test_a_sub_task_id_of_another_live_task_is_a_conflict(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    first, second, shared = new_id("task"), new_id("task"), new_id("sub")
    await client.put(
        f"/v1/memory/task-context/{first}", json=task_context(first, shared), headers=alice
    )

    clash = await client.put(
        f"/v1/memory/task-context/{second}", json=task_context(second, shared), headers=alice
    )

    assert clash.status_code == 409
    assert error_code(clash) == "sub_task_claimed"
    assert (await client.get(f"/v1/memory/task-context/{second}", headers=alice)).status_code == 404


async def test_a_stale_save_is_a_conflict(client: httpx.AsyncClient, alice: dict[str, str]) -> None:
    task = new_id("task")
    url = f"/v1/memory/task-context/{task}"
    await client.put(url, json=task_context(task), headers=alice)
    await client.put(url, json={**task_context(task), "expected_version": 1}, headers=alice)

    stale = await client.put(url, json={**task_context(task), "expected_version": 1}, headers=alice)

    assert stale.status_code == 409
    assert error_code(stale) == "version_conflict"


async def test_a_deleted_context_is_no_longer_found_by_its_sub_tasks(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    task, sub = new_id("task"), new_id("sub")
    await client.put(f"/v1/memory/task-context/{task}", json=task_context(task, sub), headers=alice)

    deleted = await client.delete(f"/v1/memory/task-context/{task}", headers=alice)

    assert deleted.status_code == 204
    assert (await client.get(f"/v1/memory/task-context/{task}", headers=alice)).status_code == 404
    assert (
        await client.get(f"/v1/memory/task-context/by-subtask/{sub}", headers=alice)
    ).status_code == 404
    assert (
        await client.delete(f"/v1/memory/task-context/{task}", headers=alice)
    ).status_code == 404


async def test_a_context_with_a_ttl_expires_with_its_sub_task_index(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    task, sub = new_id("task"), new_id("sub")
    await client.put(
        f"/v1/memory/task-context/{task}",
        json={**task_context(task, sub), "ttl_seconds": 1},
        headers=alice,
    )

    async def gone() -> httpx.Response | None:
        response = await client.get(f"/v1/memory/task-context/{task}", headers=alice)
        return response if response.status_code != 200 else None

    expired = await eventually(gone, timeout=10, interval=0.1, what="the context expired")

    assert expired.status_code == 404
    assert (
        await client.get(f"/v1/memory/task-context/by-subtask/{sub}", headers=alice)
    ).status_code == 404


async def test_an_expired_context_gives_up_its_ids_and_starts_again_at_version_1(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    task, heir, sub = new_id("task"), new_id("task"), new_id("sub")
    url = f"/v1/memory/task-context/{task}"
    await client.put(url, json={**task_context(task, sub), "ttl_seconds": 3}, headers=alice)
    await client.put(url, json={**task_context(task, sub), "ttl_seconds": 3}, headers=alice)
    taken = await client.put(
        f"/v1/memory/task-context/{heir}", json=task_context(heir, sub), headers=alice
    )
    assert taken.status_code == 409  # still live: the id is the first task's

    async def released() -> httpx.Response | None:
        response = await client.put(
            f"/v1/memory/task-context/{heir}", json=task_context(heir, sub), headers=alice
        )
        return response if response.status_code == 200 else None

    await eventually(released, timeout=10, interval=0.1, what="the expired task's id was free")
    again = await client.put(url, json={**task_context(task), "expected_version": 0}, headers=alice)

    assert again.status_code == 200
    assert again.json()["version"] == 1  # a new life, not version 3
    found = await client.get(f"/v1/memory/task-context/by-subtask/{sub}", headers=alice)
    assert found.json()["task_id"] == heir


async def test_a_plans_task_contexts_list_oldest_first_page_by_page(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    plan = new_id("plan")
    tasks = [new_id(f"task{n}") for n in range(3)]
    for task in tasks:
        await client.put(
            f"/v1/memory/task-context/{task}", json=task_context(task, plan_id=plan), headers=alice
        )
    await client.put(
        f"/v1/memory/task-context/{new_id('other')}", json=task_context(new_id("x")), headers=alice
    )

    first = (
        await client.get(
            "/v1/memory/task-context", params={"plan_id": plan, "limit": 2}, headers=alice
        )
    ).json()
    second = (
        await client.get(
            "/v1/memory/task-context",
            params={"plan_id": plan, "cursor": first["next_cursor"]},
            headers=alice,
        )
    ).json()

    assert [item["task_id"] for item in first["items"] + second["items"]] == tasks
    assert second["next_cursor"] is None


async def test_a_context_naming_another_task_than_the_url_is_refused(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    response = await client.put(
        f"/v1/memory/task-context/{new_id('task')}",
        json=task_context("someone-else"),
        headers=alice,
    )

    assert response.status_code == 422
    assert error_code(response) == "validation_failed"


async def test_another_tenant_cannot_restore_or_delete_a_task(
    client: httpx.AsyncClient, alice: dict[str, str], stranger: dict[str, str]
) -> None:
    task, sub = new_id("task"), new_id("sub")
    await client.put(f"/v1/memory/task-context/{task}", json=task_context(task, sub), headers=alice)

    by_id = await client.get(f"/v1/memory/task-context/{task}", headers=stranger)
    by_sub = await client.get(f"/v1/memory/task-context/by-subtask/{sub}", headers=stranger)
    delete = await client.delete(f"/v1/memory/task-context/{task}", headers=stranger)

    assert [by_id.status_code, by_sub.status_code, delete.status_code] == [404, 404, 404]
    assert (await client.get(f"/v1/memory/task-context/{task}", headers=alice)).status_code == 200
