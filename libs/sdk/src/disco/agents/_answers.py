"""Reading an answer: an :class:`ActionResultData` or a human's :class:`HumanInputResponse`.

Workers (:class:`~disco.agents.ResultContext`) and Planners
(:class:`~disco.agents.TransitionContext`) read answers the same way.
"""

from __future__ import annotations

from pydantic import JsonValue, ValidationError

from disco_common.a2a import A2AMessageContext
from disco_common.envelope import Envelope
from disco_common.notifications import HumanInputResponse
from disco_common.tasks import ActionResultData, ErrorInfo

__all__ = ["AnswerView"]


class AnswerView:
    """An answer's envelope, read as ``success``, ``result`` and ``error``.

    A human's answer reads as ``result`` = the answer, ``human_input`` = the
    whole :class:`HumanInputResponse` (``success`` false when it timed out); an
    :class:`ActionResultData` answer as its fields; anything else as
    ``result`` = the data, a success.
    """

    def __init__(self, envelope: Envelope, *, from_human: bool, timeout_message: str) -> None:
        self.envelope = envelope
        self.success = True
        self.result: JsonValue = envelope.data
        self.error: ErrorInfo | None = None
        self.human_input: HumanInputResponse | None = None
        data = envelope.data
        if from_human:
            try:
                self.human_input = HumanInputResponse.model_validate(data)
            except ValidationError:
                self.human_input = HumanInputResponse(answer=data)
            self.result = self.human_input.answer
            if self.human_input.timed_out:
                self.success = False
                self.error = ErrorInfo(type="hitl_timeout", message=timeout_message)
        elif isinstance(data, dict) and isinstance(data.get("success"), bool):
            try:
                parsed = ActionResultData.model_validate(data)
            except ValidationError:
                pass
            else:
                self.success, self.result, self.error = parsed.success, parsed.result, parsed.error

    @property
    def event_type(self) -> str:
        """The answer's event type (the ``response_event`` the request named)."""
        return self.envelope.type

    @property
    def a2a(self) -> A2AMessageContext | None:
        """The A2A message this answer came from: a human's answer an A2A caller sent
        through the gateway (the caller's next message on the task); else None."""
        return A2AMessageContext.of(self.envelope.extensions)

    @property
    def data(self) -> JsonValue:
        """The answer's data as it came."""
        return self.envelope.data
