"""Human-in-the-loop timeouts: watch questions to humans, time out the unanswered.

Protocol (DESIGN.md, seed 004 Q2): an agent publishes ``notification.human_input``
on ``notification-events`` with ``timeout_seconds`` and a ``correlation_id``; the
answer comes on the same topic typed the question's ``response_event`` with the
same correlation id. When the deadline passes first, the tracker publishes
``task.timeout`` on ``system-events`` and, on ``notification-events``, the
``response_event`` itself with ``HumanInputResponse(timed_out=True)``, so the
asker always receives exactly one of answer or timeout (it ignores whichever
comes second).

Questions without ``timeout_seconds`` (a plan waiting on a person for as long as
it takes) are listed too — ``GET /v1/tracker/hitl?status=waiting`` is the inbox
of open questions — but never time out.
"""
