"""Property tests: any valid envelope survives JSON and Kafka; invalid ones never get in."""

from __future__ import annotations

import json
import operator
import re
import string
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_core import to_json

from disco_common.envelope import (
    WIRE_NAMES,
    ActionRequest,
    ActionResult,
    BusinessFact,
    Envelope,
    EnvelopeError,
    Notification,
    SystemEvent,
    envelope_class_for,
    headers_dict,
)
from disco_common.topics import Topic
from tests.fixtures.properties import examples

# Per-test settings, not a profile: loading a profile would change every other
# hypothesis test in the same pytest session.
properties = settings(max_examples=examples(150), suppress_health_check=[HealthCheck.too_slow])

ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:@-]*"
EVENT_TYPE_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:/-]*"


ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


def _word(rest: str, max_rest: int) -> st.SearchStrategy[str]:
    """``[A-Za-z0-9][rest]{0,max_rest}``, drawn character by character (from_regex is slower)."""
    return st.builds(
        operator.add, st.sampled_from(ALNUM), st.text(alphabet=rest, max_size=max_rest)
    )


def _hex(size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=HEX, min_size=size, max_size=size)


ids = _word(ALNUM + "._:@-", 60)
event_types = _word(ALNUM + "._:/-", 60)
tenants = _word(ALNUM + "._-", 40)
topics = st.text(alphabet=ALNUM + "._-", min_size=1, max_size=60)
traceparents = st.builds("-".join, st.tuples(_hex(2), _hex(32), _hex(16), _hex(2)))
times = st.datetimes(
    min_value=datetime(1970, 1, 2),
    max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone.min]),
)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)
extension_names = st.text(
    alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=20
).filter(lambda name: name not in Envelope.model_fields and name not in WIRE_NAMES.values())


def _optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


@st.composite
def envelope_fields(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "id": draw(ids),
        "source": draw(st.text(min_size=1, max_size=80)),
        "type": draw(event_types),
        "time": draw(times),
        "subject": draw(_optional(st.text(max_size=40))),
        "data": draw(json_values),
        "correlation_id": draw(_optional(ids)),
        "causation_id": draw(_optional(ids)),
        "tenant_id": draw(_optional(tenants)),
        "user_id": draw(_optional(ids)),
        "session_id": draw(_optional(ids)),
        "plan_id": draw(_optional(ids)),
        "task_id": draw(_optional(ids)),
        "response_event": draw(_optional(event_types)),
        "response_topic": draw(_optional(topics)),
        "payload_schema": draw(_optional(st.text(min_size=1, max_size=40))),
        "traceparent": draw(_optional(traceparents)),
    }
    # Extensions are non-null: a null CloudEvents attribute means "absent".
    extensions = draw(
        st.dictionaries(extension_names, json_values.filter(lambda v: v is not None), max_size=3)
    )
    return {**fields, **extensions}


envelopes = envelope_fields().map(lambda fields: Envelope(**fields))


@properties
@given(envelopes)
def test_any_valid_envelope_round_trips_through_json(envelope: Envelope) -> None:
    assert Envelope.model_validate_json(envelope.model_dump_json()) == envelope


@properties
@given(envelopes)
def test_any_valid_envelope_round_trips_through_a_kafka_value(envelope: Envelope) -> None:
    assert Envelope.from_kafka_value(envelope.to_kafka_value()) == envelope


@properties
@given(envelopes)
def test_the_time_of_any_envelope_is_utc(envelope: Envelope) -> None:
    assert envelope.time.utcoffset() == timedelta(0)


@properties
@given(envelopes)
def test_kafka_key_is_plan_then_correlation_then_id(envelope: Envelope) -> None:
    expected = envelope.plan_id or envelope.correlation_id or envelope.id

    assert envelope.kafka_key() == expected.encode()


@properties
@given(envelopes)
def test_kafka_headers_repeat_type_id_tenant_and_trace(envelope: Envelope) -> None:
    headers = headers_dict(envelope.kafka_headers())

    assert headers["ce_type"] == envelope.type
    assert headers["ce_id"] == envelope.id
    assert headers.get("ce_tenantid") == envelope.tenant_id
    assert headers.get("traceparent") == envelope.traceparent
    assert "tenant_id" not in headers


@properties
@given(envelopes)
def test_the_wire_uses_cloudevents_attribute_names_and_readers_take_both(
    envelope: Envelope,
) -> None:
    wire = json.loads(envelope.to_kafka_value())

    # CloudEvents: attribute names are lower-case letters and digits only.
    assert all(name.isalnum() and name == name.lower() for name in wire)
    for python_name, wire_name in WIRE_NAMES.items():
        assert wire.get(wire_name) == envelope.model_dump(mode="json").get(python_name)
    legacy = envelope.model_dump_json(exclude_none=True).encode()
    assert Envelope.from_kafka_value(legacy) == envelope
    assert Envelope.from_kafka_value(envelope.to_kafka_value()) == envelope


@properties
@given(envelopes)
def test_a_binary_mode_record_reads_as_the_same_envelope(envelope: Envelope) -> None:
    wire = envelope.to_wire_dict()
    data = wire.pop("data", None)
    wire.pop("datacontenttype")
    headers = [("content-type", b"application/json")]
    for name, value in wire.items():
        text = value if isinstance(value, str) else json.dumps(value)
        headers.append((f"ce_{name}", text.encode()))

    if any(not isinstance(value, str) for value in wire.values()):
        return  # binary-mode headers carry strings; non-string extensions do not map
    parsed = Envelope.from_kafka_record(to_json(data), headers)

    assert parsed == envelope


def test_a_structured_record_with_ce_headers_is_not_read_as_binary() -> None:
    envelope = Envelope(source="s", type="t.x", tenant_id="acme", data={"a": 1})

    parsed = Envelope.from_kafka_record(envelope.to_kafka_value(), envelope.kafka_headers())

    assert parsed == envelope


def test_binary_mode_with_non_json_data_is_refused_with_the_reason() -> None:
    headers = [
        ("ce_specversion", b"1.0"),
        ("ce_id", b"1"),
        ("ce_source", b"s"),
        ("ce_type", b"t"),
        ("content-type", b"text/plain"),
    ]

    with pytest.raises(EnvelopeError, match="JSON"):
        Envelope.from_kafka_record(b"hello", headers)


@properties
@given(envelope_fields(), event_types)
def test_an_action_request_round_trips_and_keeps_its_response_rules(
    fields: dict[str, Any], response_event: str
) -> None:
    fields = {**fields, "response_event": response_event}
    if fields["response_topic"] is None:
        del fields["response_topic"]

    request = ActionRequest(**fields)
    restored = ActionRequest.from_kafka_value(request.to_kafka_value())

    assert restored == request
    assert restored.response_event == response_event
    assert restored.response_topic == (fields.get("response_topic") or Topic.ACTION_RESULTS.value)


@properties
@given(envelope_fields())
def test_an_action_request_without_response_event_is_rejected(fields: dict[str, Any]) -> None:
    fields = {**fields, "response_event": None}

    with pytest.raises(EnvelopeError, match="response_event"):
        ActionRequest.from_dict(fields)


@properties
@given(envelope_fields(), ids)
def test_an_action_result_round_trips_with_its_correlation_id(
    fields: dict[str, Any], correlation_id: str
) -> None:
    result = ActionResult(**{**fields, "correlation_id": correlation_id})

    assert ActionResult.from_kafka_value(result.to_kafka_value()) == result


@properties
@given(envelope_fields())
def test_an_action_result_without_correlation_id_is_rejected(fields: dict[str, Any]) -> None:
    envelope = Envelope(**{**fields, "correlation_id": None})

    with pytest.raises(EnvelopeError, match="correlation_id"):
        envelope.as_(ActionResult)


@pytest.mark.parametrize(
    ("topic", "kind"),
    [
        (Topic.ACTION_REQUESTS, ActionRequest),
        (Topic.ACTION_RESULTS, ActionResult),
        (Topic.BUSINESS_FACTS, BusinessFact),
        (Topic.SYSTEM_EVENTS, SystemEvent),
        (Topic.NOTIFICATION_EVENTS, Notification),
    ],
)
def test_each_topic_has_its_specialisation(topic: Topic, kind: type[Envelope]) -> None:
    assert envelope_class_for(topic) is kind


@properties
@given(st.text(max_size=250).filter(lambda s: not re.fullmatch(ID_PATTERN, s) or len(s) > 200))
def test_an_invalid_id_is_rejected(bad_id: str) -> None:
    with pytest.raises(ValidationError):
        Envelope(id=bad_id, source="test", type="thing.happened")


@properties
@given(
    st.text(max_size=250).filter(lambda s: not re.fullmatch(EVENT_TYPE_PATTERN, s) or len(s) > 200)
)
def test_an_invalid_event_type_is_rejected(bad_type: str) -> None:
    with pytest.raises(ValidationError):
        Envelope(source="test", type=bad_type)


@properties
@given(envelope_fields(), st.text(max_size=40).filter(lambda s: not re.fullmatch(ID_PATTERN, s)))
def test_an_invalid_correlation_id_is_rejected(fields: dict[str, Any], bad_id: str) -> None:
    with pytest.raises(EnvelopeError, match="correlation_id"):
        Envelope.from_dict({**fields, "correlation_id": bad_id})


@properties
@given(st.binary(max_size=300))
def test_any_bytes_either_parse_or_raise_envelope_error(value: bytes) -> None:
    outcome: Envelope | EnvelopeError
    try:
        outcome = Envelope.from_kafka_value(value)
    except EnvelopeError as exc:
        outcome = exc

    assert isinstance(outcome, Envelope) or outcome.reason


@properties
@given(json_values.filter(lambda v: not (isinstance(v, dict) and {"source", "type"} <= v.keys())))
def test_any_json_that_is_not_an_envelope_raises_envelope_error(value: Any) -> None:
    with pytest.raises(EnvelopeError):
        Envelope.from_kafka_value(to_json(value))


@properties
@given(
    st.text(min_size=1, max_size=80).filter(
        lambda s: (
            not re.fullmatch(r"[a-z0-9]{1,64}", s)
            and s not in Envelope.model_fields
            and s not in WIRE_NAMES.values()
        )
    )
)
def test_an_attribute_that_is_not_an_extension_name_is_refused_with_the_reason(
    name: str,
) -> None:
    value = to_json({"source": "s", "type": "t.x", name: "v"})

    with pytest.raises(EnvelopeError) as refused:
        Envelope.from_kafka_value(value)

    assert f"unknown attribute {name!r}" in refused.value.reason
    with pytest.raises(ValidationError):
        Envelope(source="s", type="t.x", **{name: "v"})


def test_extension_attributes_are_kept_and_base64_data_is_refused() -> None:
    kept = Envelope.from_kafka_value(to_json({"source": "s", "type": "t.x", "myext2": [1]}))
    assert kept.extensions == {"myext2": [1]}

    with pytest.raises(EnvelopeError) as refused:
        Envelope.from_dict({"source": "s", "type": "", "data_base64": "aGk="})
    assert "data_base64 is not supported" in refused.value.reason
    assert "type:" in refused.value.reason  # the other problems are still named
