"""Step records (``/v1/memory/steps``): the journal behind ``disco.step``, per tenant,
consumer group and envelope; the first record of a step wins."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from disco.clients import MemoryClient, acting_for
from disco_common.auth import Role
from tests.integration.memory.conftest import bearer, error_code, new_id


async def test_a_step_is_recorded_once_and_the_first_result_stands(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    envelope = new_id("evt")
    url = f"/v1/memory/steps/payments/{envelope}"

    empty = await client.get(url, headers=alice)
    first = await client.post(url, json={"name": "charge card", "result": {"id": 1}}, headers=alice)
    again = await client.post(url, json={"name": "charge card", "result": {"id": 2}}, headers=alice)
    other = await client.post(url, json={"name": "e-mail", "result": None}, headers=alice)
    journal = await client.get(url, headers=alice)

    assert empty.status_code == 200
    assert empty.json() == {"group": "payments", "envelope_id": envelope, "steps": []}
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 201)
    assert again.json() == first.json()  # the first record, unchanged
    assert first.json()["result"] == {"id": 1}
    assert [(s["name"], s["result"]) for s in journal.json()["steps"]] == [
        ("charge card", {"id": 1}),
        ("e-mail", None),
    ]


async def test_steps_belong_to_one_tenant_and_one_group(
    client: httpx.AsyncClient, alice: dict[str, str], bob: dict[str, str]
) -> None:
    envelope = new_id("evt")
    await client.post(
        f"/v1/memory/steps/payments/{envelope}", json={"name": "s", "result": 1}, headers=alice
    )

    same_tenant = await client.get(f"/v1/memory/steps/payments/{envelope}", headers=bob)
    other_group = await client.get(f"/v1/memory/steps/billing/{envelope}", headers=alice)
    other_tenant = await client.get(
        f"/v1/memory/steps/payments/{envelope}", headers=bearer(new_id("tenant"))
    )

    assert len(same_tenant.json()["steps"]) == 1  # a group's journal is its tenant's
    assert other_group.json()["steps"] == []
    assert other_tenant.json()["steps"] == []


async def test_a_bad_name_a_huge_result_or_a_nul_is_refused_with_the_error_shape(
    client: httpx.AsyncClient, alice: dict[str, str]
) -> None:
    url = f"/v1/memory/steps/payments/{new_id('evt')}"

    no_name = await client.post(url, json={"name": "", "result": 1}, headers=alice)
    control = await client.post(url, json={"name": "a\nb", "result": 1}, headers=alice)
    huge = await client.post(url, json={"name": "s", "result": "x" * (1 << 20)}, headers=alice)
    nul = await client.post(url, json={"name": "s", "result": "a\u0000b"}, headers=alice)
    bad_group = await client.post(
        "/v1/memory/steps/%20bad/e1", json={"name": "s", "result": 1}, headers=alice
    )

    assert [no_name.status_code, control.status_code, bad_group.status_code] == [422, 422, 422]
    assert (huge.status_code, error_code(huge)) == (413, "payload_too_large")
    assert (nul.status_code, error_code(nul)) == (422, "nul_character")
    journal = await client.get(url, headers=alice)
    assert journal.json()["steps"] == []


async def test_the_dedup_check_of_a_batch_says_which_envelopes_have_steps(
    memory_client_for: Callable[..., MemoryClient], tenant: str
) -> None:
    stepped, plain = new_id("evt"), new_id("evt")
    async with memory_client_for("platform", "agent", roles=(Role.SERVICE,)) as memory:
        with acting_for(tenant, "alice"):
            await memory.record_step("workers", stepped, "charge", {"ok": True})
            await memory.record_step("billing", plain, "charge", {"ok": True})  # another group
            answer = await memory.check_dedup_marks("workers", [stepped, plain])
            journal = await memory.step_journal("workers", stepped)

    assert list(answer) == []  # neither was marked handled...
    assert answer.stepped == {stepped}  # ...one has a journal in this group
    assert journal == {"charge": {"ok": True}}


async def test_an_agent_records_steps_for_the_tenant_of_the_envelope_it_handles(
    memory_client_for: Callable[..., MemoryClient], tenant: str, alice: dict[str, str]
) -> None:
    envelope = new_id("evt")
    async with memory_client_for("platform", "agent", roles=(Role.SERVICE,)) as memory:
        stored = await memory.record_step(
            "workers", envelope, "charge", [1, 2], tenant_id=tenant, user_id="alice"
        )
        again = await memory.record_step(
            "workers", envelope, "charge", [3], tenant_id=tenant, user_id="alice"
        )
        elsewhere = await memory.step_journal("workers", envelope, tenant_id=new_id("tenant"))

    assert (stored, again) == ([1, 2], [1, 2])
    assert elsewhere == {}
