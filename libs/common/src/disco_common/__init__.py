"""disco_common: the contracts every disco process shares.

Pydantic models only; nothing here does I/O. Import from the submodules
(``disco_common.envelope``, ``disco_common.topics``, ...) or from here.
"""

from disco_common.envelope import (
    CLOUDEVENTS_CONTENT_TYPE,
    ActionRequest,
    ActionResult,
    BusinessFact,
    Envelope,
    EnvelopeError,
    Notification,
    SystemEvent,
    envelope_class_for,
)
from disco_common.errors import ErrorBody, ErrorCode, ErrorResponse
from disco_common.ids import new_id, utcnow
from disco_common.topics import DLQ_SUFFIX, Topic, dlq_topic, topic_name

__all__ = [
    "CLOUDEVENTS_CONTENT_TYPE",
    "DLQ_SUFFIX",
    "ActionRequest",
    "ActionResult",
    "BusinessFact",
    "Envelope",
    "EnvelopeError",
    "ErrorBody",
    "ErrorCode",
    "ErrorResponse",
    "Notification",
    "SystemEvent",
    "Topic",
    "dlq_topic",
    "envelope_class_for",
    "new_id",
    "topic_name",
    "utcnow",
]
