"""The a2a-sdk's check of a request's REQUIRED fields, with what it looks up kept per type.

The a2a-sdk's request handler checks every request with
``a2a.utils.proto_utils.validate_proto_required_fields`` before it takes it up:
it reads each field's options (``google.api.field_behavior``) anew on every
call and walks into every nested message, a data part's whole ``Struct``
included. The gateway runs the same check, with the same errors, when it prepares
a message (before its fast path goes around that handler, and before a message
claims its turn): which fields are REQUIRED, and which nested types can hold one
at all, is worked out once per message type.
"""

from __future__ import annotations

from dataclasses import dataclass

from a2a.types.a2a_pb2 import SendMessageRequest
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import ValidationDetail
from google.api.field_behavior_pb2 import (  # type: ignore[import-untyped]
    REQUIRED,
    field_behavior,
)
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

__all__ = ["check_required_fields"]


@dataclass(frozen=True)
class _Check:
    field: FieldDescriptor
    required: bool
    """The field is REQUIRED."""
    nested: str | None
    """How to walk into it ("one", "map", "list"), when its type can hold a REQUIRED field."""


_SHAPES: dict[Descriptor, tuple[_Check, ...]] = {}
_CAN_REQUIRE: dict[Descriptor, bool] = {}


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _can_require(descriptor: Descriptor) -> bool:
    """Whether a message of this type (or any nested in it) has a REQUIRED field."""
    known = _CAN_REQUIRE.get(descriptor)
    if known is not None:
        return known
    seen = {descriptor}
    pending = [descriptor]
    found = False
    while pending and not found:
        for field in pending.pop().fields:
            if REQUIRED in field.GetOptions().Extensions[field_behavior]:
                found = True
                break
            nested = field.message_type
            if nested is not None and nested not in seen:
                seen.add(nested)
                pending.append(nested)
    _CAN_REQUIRE[descriptor] = found
    return found


def _shape(descriptor: Descriptor) -> tuple[_Check, ...]:
    """The fields to look at, in declaration order (the order the a2a-sdk reports in)."""
    shape = _SHAPES.get(descriptor)
    if shape is not None:
        return shape
    checks: list[_Check] = []
    for field in descriptor.fields:
        required = REQUIRED in field.GetOptions().Extensions[field_behavior]
        nested: str | None = None
        entry = field.message_type
        if field.type == FieldDescriptor.TYPE_MESSAGE and entry is not None:
            if _repeated(field) and entry.GetOptions().map_entry:
                value = entry.fields_by_name["value"].message_type
                nested = "map" if value is not None and _can_require(value) else None
            elif _can_require(entry):
                nested = "list" if _repeated(field) else "one"
        if required or nested is not None:
            checks.append(_Check(field, required, nested))
    shape = tuple(checks)
    _SHAPES[descriptor] = shape
    return shape


def _violation(message: Message, field: FieldDescriptor) -> ValidationDetail | None:
    value = getattr(message, field.name)
    if _repeated(field):
        if not value:
            return ValidationDetail(
                field=field.name, message="Field must contain at least one element."
            )
    elif field.has_presence:
        if not message.HasField(field.name):
            return ValidationDetail(field=field.name, message="Field is required.")
    elif value == field.default_value:
        return ValidationDetail(field=field.name, message="Field is required.")
    return None


def _nested(errors: list[ValidationDetail], prefix: str, found: list[ValidationDetail]) -> None:
    for error in found:
        field = error["field"]
        errors.append(
            ValidationDetail(
                field=f"{prefix}.{field}" if field else prefix, message=error["message"]
            )
        )


def _errors(message: Message) -> list[ValidationDetail]:
    errors: list[ValidationDetail] = []
    for check in _shape(message.DESCRIPTOR):  # type: ignore[arg-type]
        field = check.field
        if check.required and (violation := _violation(message, field)) is not None:
            errors.append(violation)
        if check.nested is None:
            continue
        value = getattr(message, field.name)
        if check.nested == "one":
            if message.HasField(field.name):
                _nested(errors, field.name, _errors(value))
        elif check.nested == "map":
            for key, item in value.items():
                _nested(errors, f"{field.name}[{key}]", _errors(item))
        else:
            for index, item in enumerate(value):
                _nested(errors, f"{field.name}[{index}]", _errors(item))
    return errors


def check_required_fields(request: SendMessageRequest) -> None:
    """What ``validate_proto_required_fields`` does, for a message to send.

    Raises:
        InvalidParamsError: a REQUIRED field is missing or empty (every one listed).
    """
    errors = _errors(request)
    if errors:
        raise InvalidParamsError(message="Validation failed", data={"errors": errors})
