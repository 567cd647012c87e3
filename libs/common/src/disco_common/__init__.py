"""disco_common: the contracts every disco process shares.

Pydantic models and pure helpers only; nothing here does I/O. The package
exports nothing itself: import each name from its module (``from
disco_common.envelope import Envelope``):

- ``envelope``, ``topics``: the bus (CloudEvents envelope, topic names);
- ``registry``: agents, capabilities, event definitions, payload schemas, discovery;
- ``asyncapi``: the AsyncAPI document of a tenant's bus (its query and extensions);
- ``plans``, ``tasks``: the Planner's state machine and the Worker's task context,
  and the result payload convention of ``action-results``;
- ``system_events``, ``notifications``: payloads on ``system-events`` and
  ``notification-events`` (HITL, agent UI events, tool lifecycle);
- ``memory`` (a package, one module per family; every name is importable from
  ``disco_common.memory`` itself), ``tracker``: the memory and tracker services'
  DTOs; ``dedup`` and ``steps``: the memory service's dedup marks and step
  records (exactly-once handling);
- ``a2a``: the A2A v1.0 objects disco exchanges with outside callers and the
  task-state mapping; ``a2a_cards``: A2A agent cards and the one card builder;
- ``pagination``, ``errors``, ``auth``, ``ids``, ``canonical``: shared plumbing;
- ``services``: how an installed service makes itself known to the tooling.
"""

__all__: list[str] = []
