"""``disco answer`` without a tracker: the questions on notification-events nobody answered."""

from __future__ import annotations

from disco._cli.answer import pending
from disco_common.envelope import Envelope
from disco_common.notifications import NotificationType


def _question(correlation_id: str, text: str, response_event: str) -> Envelope:
    return Envelope(
        source="urn:planner",
        type=NotificationType.HUMAN_INPUT,
        correlation_id=correlation_id,
        tenant_id="acme",
        plan_id="plan-1",
        data={
            "question": text,
            "response_event": response_event,
            "options": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
        },
    )


def _answer(correlation_id: str, event_type: str) -> Envelope:
    return Envelope(
        source="urn:ui", type=event_type, correlation_id=correlation_id, data={"answer": "yes"}
    )


def test_a_question_is_pending_until_its_response_event_answers_it() -> None:
    boat = _question("q-1", "Go by boat instead?", "trip.boat.decided")
    hotel = _question("q-2", "Book a hotel?", "trip.hotel.decided")
    unrelated = _answer("q-2", "trip.something.else")  # not the event the question waits for

    waiting = pending([boat, hotel, unrelated, _answer("q-1", "trip.boat.decided")])

    assert [(q.correlation_id, q.question, q.options) for q in waiting] == [
        ("q-2", "Book a hotel?", ("yes", "no"))
    ]
    assert waiting[0].response_event == "trip.hotel.decided"
    assert waiting[0].request_id == hotel.id
    assert waiting[0].plan_id == "plan-1"
