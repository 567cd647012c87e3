"""A message's turn is its claim: recorded once (the same message sent again finds it), an
answer takes its question once, a reply is kept, and a claim whose message never went out
is given back; every tenant's apart."""

from __future__ import annotations

import uuid

from disco_gateway.tasks.repository import ScopedWrites, TurnRepository, TurnRow
from disco_service import Database
from tests.integration.gateway.conftest import new_tenant


def turn(task_id: str, number: int = 1, *, message_id: str = "m-1") -> TurnRow:
    return TurnRow(
        task_id=task_id,
        turn=number,
        correlation_id=f"{task_id}/{number}",
        context_id="ctx",
        user_id="alice",
        agent="echo",
        skill="echo",
        event_type="echo.requested",
        message={"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        question=None,
    )


async def read(db: Database, tenant: str, task_id: str, number: int) -> TurnRow | None:
    async with db.unit_of_work(tenant) as session:
        return await TurnRepository(session, tenant).get(task_id, number)


async def test_a_turn_is_recorded_once_and_another_tenant_records_its_own(db: Database) -> None:
    tenant, other = new_tenant(), new_tenant()
    task_id = str(uuid.uuid4())
    writes = ScopedWrites(db)

    first = await writes.add_turn(tenant, turn(task_id))
    again = await writes.add_turn(tenant, turn(task_id, message_id="m-2"))
    elsewhere = await writes.add_turn(other, turn(task_id))
    recorded = await read(db, tenant, task_id, 1)

    assert (first, again, elsewhere) == (True, False, True)
    assert recorded is not None
    assert recorded.message_id == "m-1"  # the first message keeps the turn


async def test_an_answer_takes_the_question_once_and_a_new_question_can_be_answered_again(
    db: Database,
) -> None:
    tenant = new_tenant()
    task_id = str(uuid.uuid4())
    await ScopedWrites(db).add_turn(tenant, turn(task_id))
    question = {"request_id": "q-1", "correlation_id": "c", "response_event": "e", "question": "?"}
    async with db.unit_of_work(tenant) as session:
        turns = TurnRepository(session, tenant)
        await turns.set_question(task_id, 1, question)
        taken = await turns.claim_answer(task_id, 1, "a-1")
        taken_again = await turns.claim_answer(task_id, 1, "a-2")
    answered = await read(db, tenant, task_id, 1)
    async with db.unit_of_work(tenant) as session:
        # The answer never went out: the question is asked again, and answered anew.
        await TurnRepository(session, tenant).set_question(task_id, 1, question)
        retaken = await TurnRepository(session, tenant).claim_answer(task_id, 1, "a-3")

    assert (taken, taken_again, retaken) == (True, False, True)
    assert answered is not None
    assert (answered.question, answered.answer_message_id) == (None, "a-1")


async def test_a_reply_is_kept_and_a_turn_given_back_is_gone(db: Database) -> None:
    tenant = new_tenant()
    kept, given_back = str(uuid.uuid4()), str(uuid.uuid4())
    writes = ScopedWrites(db)
    await writes.add_turn(tenant, turn(kept))
    await writes.add_turn(tenant, turn(given_back))
    reply = {"messageId": "r-1", "role": "ROLE_AGENT", "parts": [{"text": "hello"}]}
    async with db.unit_of_work(tenant) as session:
        await TurnRepository(session, tenant).set_reply(kept, 1, reply)
        await TurnRepository(session, tenant).delete(given_back, 1)
    with_reply = await read(db, tenant, kept, 1)

    assert with_reply is not None
    assert with_reply.reply == reply
    assert await read(db, tenant, given_back, 1) is None
    assert await writes.add_turn(tenant, turn(given_back))  # the message may come again
