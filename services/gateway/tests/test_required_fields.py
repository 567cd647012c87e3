"""The fast path's REQUIRED-field check says what the a2a-sdk's own check says."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from a2a.types import a2a_pb2
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf.json_format import ParseDict

from disco_gateway.a2a.required import check_required_fields

REQUESTS = [
    {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
    {
        "message": {
            "messageId": "m1",
            "role": "ROLE_USER",
            "parts": [{"data": {"a": [1, {"b": 2}]}}],
        }
    },
    {"message": {"role": "ROLE_USER", "parts": [{"text": "no id"}]}},
    {"message": {"messageId": "m1", "parts": [{"text": "no role"}]}},
    {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": []}},
    {"message": {"messageId": "", "parts": []}},
    {},
    {
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "x"}]},
        "configuration": {"taskPushNotificationConfig": {"taskId": "t"}},
    },
    {
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "x"}]},
        "configuration": {"historyLength": 2, "acceptedOutputModes": ["text/plain"]},
        "metadata": {"k": {"nested": True}},
    },
]


def _verdict(
    check: Callable[[a2a_pb2.SendMessageRequest], None], request: a2a_pb2.SendMessageRequest
) -> object:
    try:
        check(request)
    except InvalidParamsError as exc:
        return (exc.message, exc.data)
    return None


@pytest.mark.parametrize("document", REQUESTS)
def test_same_verdict_and_errors_as_the_sdk(document: dict[str, object]) -> None:
    request = ParseDict(document, a2a_pb2.SendMessageRequest())
    assert _verdict(check_required_fields, request) == _verdict(
        validate_proto_required_fields, request
    )


def test_a_missing_field_is_named() -> None:
    request = ParseDict(
        {"message": {"role": "ROLE_USER", "parts": []}}, a2a_pb2.SendMessageRequest()
    )
    with pytest.raises(InvalidParamsError) as raised:
        check_required_fields(request)
    fields = {error["field"] for error in raised.value.data["errors"]}  # type: ignore[index]
    assert {"message.message_id", "message.parts"} <= fields


def test_the_card_the_handler_checks_capabilities_on_has_every_required_field() -> None:
    from disco_gateway.a2a.handler import gateway_card_proto

    validate_proto_required_fields(gateway_card_proto())  # raises on a missing one
