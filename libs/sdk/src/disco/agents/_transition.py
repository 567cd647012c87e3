"""An event that may move a plan: :class:`TransitionContext`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from disco.agents._answers import AnswerView
from disco_common.envelope import Envelope
from disco_common.topics import Topic

if TYPE_CHECKING:
    from disco.agents._plan import PlanContext

__all__ = ["TransitionContext"]


class TransitionContext(AnswerView):
    """An event that may move a plan: the answer to one of its actions (or a human's answer).

    ``success``/``result``/``error`` read an :class:`ActionResultData` answer; a
    human's answer reads as ``result`` = the answer (``success`` false when it
    timed out). ``next_state`` is where the state machine would go.
    """

    def __init__(self, envelope: Envelope, plan: PlanContext, topic: str) -> None:
        super().__init__(
            envelope,
            from_human=topic == Topic.NOTIFICATION_EVENTS.value,
            timeout_message="nobody answered in time",
        )
        self.plan = plan
        self.topic = topic

    @property
    def correlation_id(self) -> str | None:
        """The id of the action this answers."""
        return self.envelope.correlation_id

    @property
    def next_state(self) -> str | None:
        """The state the plan's transitions lead to on this event, if any."""
        return self.plan.get_next_state(self)

    def variables(self) -> dict[str, Any]:
        """What conditions and templates see (see :mod:`disco.conditions`)."""
        variables = self.plan.variables()
        variables.update(
            {
                "success": self.success,
                "result": self.result,
                "error": self.error.model_dump(mode="json") if self.error else None,
                "data": self.envelope.data,
                "event": {
                    "type": self.envelope.type,
                    "id": self.envelope.id,
                    "correlation_id": self.envelope.correlation_id,
                    "source": self.envelope.source,
                    "topic": self.topic,
                },
            }
        )
        return variables
