"""Property: any valid envelope survives the Kafka mapping (value, key, headers)."""

from __future__ import annotations

import operator
import string
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from disco.bus._wire import record_for
from disco_common.envelope import (
    ActionRequest,
    ActionResult,
    BusinessFact,
    Envelope,
    Notification,
    SystemEvent,
    envelope_class_for,
    headers_dict,
)
from tests.fixtures.properties import examples

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


def _word(rest: str, max_rest: int) -> st.SearchStrategy[str]:
    """``[A-Za-z0-9][rest]{0,max_rest}``, drawn character by character (from_regex is slower)."""
    return st.builds(
        operator.add, st.sampled_from(ALNUM), st.text(alphabet=rest, max_size=max_rest)
    )


ids = _word(ALNUM + "._:@-", 40)
tenants = _word(ALNUM + "._-", 30)
event_types = _word(ALNUM + "._:/-", 40)
topics = st.text(alphabet=ALNUM + "._-", min_size=1, max_size=40)
traceparents = st.builds(
    "00-{}-{}-0{}".format,
    st.text(alphabet=HEX, min_size=32, max_size=32),
    st.text(alphabet=HEX, min_size=16, max_size=16),
    st.sampled_from("01"),
)
times = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 31), timezones=st.just(UTC)
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
optional_attributes = st.fixed_dictionaries(
    {},
    optional={
        "subject": st.text(min_size=0, max_size=40),
        "correlation_id": ids,
        "causation_id": ids,
        "tenant_id": tenants,
        "user_id": ids,
        "session_id": ids,
        "plan_id": ids,
        "task_id": ids,
        "response_event": event_types,
        "response_topic": topics,
        "payload_schema": st.text(min_size=1, max_size=40),
        "traceparent": traceparents,
        "myextension": st.text(max_size=20),
    },
)
kinds = st.sampled_from(
    [Envelope, ActionRequest, ActionResult, BusinessFact, SystemEvent, Notification]
)


@st.composite
def envelopes(draw: st.DrawFn) -> Envelope:
    kind = draw(kinds)
    attributes = draw(optional_attributes)
    if kind is ActionRequest:
        attributes.setdefault("response_event", draw(event_types))
    if kind is ActionResult:
        attributes.setdefault("correlation_id", draw(ids))
    return kind(
        id=draw(ids),
        source=draw(st.text(min_size=1, max_size=60)),
        type=draw(event_types),
        time=draw(times),
        data=draw(json_values),
        **attributes,
    )


@settings(max_examples=examples(300), deadline=None)
@given(envelopes())
def test_any_valid_envelope_round_trips_through_the_kafka_record(envelope: Envelope) -> None:
    record = record_for(envelope)
    kind = type(envelope)
    topic = kind.topic_hint.value if kind.topic_hint else "custom-topic"

    parsed = envelope_class_for(topic).from_kafka_value(record.value)

    assert parsed == envelope
    assert type(parsed) is kind
    assert record.key == (envelope.plan_id or envelope.correlation_id or envelope.id).encode()
    headers = headers_dict(record.headers)
    assert headers["ce_id"] == envelope.id
    assert headers["ce_type"] == envelope.type
    assert headers.get("ce_tenantid") == envelope.tenant_id
    assert headers.get("traceparent") == envelope.traceparent
    assert record.size >= len(record.value) + len(record.key)


@settings(max_examples=examples(100), deadline=None)
@given(envelopes(), st.text(alphabet=ALNUM + "._-", min_size=1, max_size=400))
def test_a_signed_record_carries_the_credential_beside_the_routing_headers(
    envelope: Envelope, credential: str
) -> None:
    record = record_for(envelope, ("disco-tenant-credential", credential.encode()))
    unsigned = record_for(envelope)

    headers = headers_dict(record.headers)
    assert headers["disco-tenant-credential"] == credential
    assert headers["ce_id"] == envelope.id
    assert headers.get("ce_tenantid") == envelope.tenant_id
    assert "disco-tenant-credential" not in headers_dict(unsigned.headers)
    assert record.size > unsigned.size
    # The credential is about the record, not the event: a binary-mode reader
    # (every ce_* header an attribute) never sees it in the envelope.
    kind = type(envelope)
    topic = kind.topic_hint.value if kind.topic_hint else "custom-topic"
    parsed = envelope_class_for(topic).from_kafka_record(record.value, record.headers)
    assert parsed == envelope
    assert "disco-tenant-credential" not in parsed.to_wire_dict()
