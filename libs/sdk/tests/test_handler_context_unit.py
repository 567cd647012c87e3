"""The handler context accessor, without a broker."""

from __future__ import annotations

import pytest
import structlog

import disco
from disco_common.envelope import ActionRequest, Envelope


def test_outside_a_handler_the_accessor_raises_a_clear_error() -> None:
    with pytest.raises(disco.NotInHandlerError, match="inside a bus handler"):
        disco.current_context()


def test_inside_handler_context_the_envelope_and_its_topic_are_current() -> None:
    envelope = ActionRequest(source="urn:t", type="a.requested", response_event="a.completed")

    with disco.handler_context(envelope):
        assert disco.current_envelope() is envelope
        assert disco.current_context().topic == "action-requests"

    with pytest.raises(disco.NotInHandlerError):
        disco.current_envelope()


def test_log_lines_inside_a_handler_carry_the_envelope_id_type_and_tenant() -> None:
    envelope = Envelope(source="urn:t", type="x.happened", tenant_id="acme")

    with disco.handler_context(disco.HandlerContext(envelope=envelope, topic="business-facts")):
        bound = structlog.contextvars.get_contextvars()

    assert bound["event_id"] == envelope.id
    assert bound["event_type"] == "x.happened"
    assert bound["tenant_id"] == "acme"
    assert "event_id" not in structlog.contextvars.get_contextvars()


def test_the_idempotency_key_is_the_same_per_envelope_and_group_and_differs_otherwise() -> None:
    envelope = ActionRequest(source="urn:t", type="a.requested", response_event="a.completed")
    other = ActionRequest(source="urn:t", type="a.requested", response_event="a.completed")

    def key(envelope: Envelope, group: str | None, attempt: int = 1) -> str:
        context = disco.HandlerContext(envelope=envelope, topic="t", attempt=attempt, group=group)
        return context.idempotency_key

    assert key(envelope, "workers") == key(envelope, "workers", attempt=3)
    assert key(envelope, "workers") == f"workers/{envelope.id}"
    assert key(envelope, "workers") != key(envelope, "planners")
    assert key(envelope, "workers") != key(other, "workers")
    assert key(envelope, None) == envelope.id


def test_the_bus_per_record_context_is_built_on_first_question_and_undone_on_exit() -> None:
    from disco._context import enter_record, exit_handler, maybe_current_context

    envelope = Envelope(source="urn:t", type="x.happened", tenant_id="acme")
    entered = enter_record((envelope, "business-facts", 2, 41, 1, "billing", None), True)
    try:
        context = disco.current_context()
        assert context == disco.HandlerContext(
            envelope=envelope, topic="business-facts", partition=2, offset=41, group="billing"
        )
        assert disco.current_context() is context  # built once per handling
        assert structlog.contextvars.get_contextvars()["event_id"] == envelope.id
    finally:
        exit_handler(entered)

    assert maybe_current_context() is None
    assert "event_id" not in structlog.contextvars.get_contextvars()
