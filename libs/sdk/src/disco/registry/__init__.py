"""Registry-side building blocks of an agent: staying registered, and checking payloads.

- :class:`AgentRegistrar` registers an agent with its capabilities, heartbeats,
  re-registers when the registry forgot it or comes back after an outage, and
  deregisters on a clean stop. It never crashes the agent: failures are logged.
- :class:`PayloadValidator` checks a payload against the JSON Schema registered
  for its event type (cached briefly) and raises :class:`PayloadValidationError`
  listing every violation. Install it on a bus with
  ``bus.set_request_validator(validator.validate)``.
"""

from disco.registry._registrar import AgentRegistrar
from disco.registry._validator import PayloadValidationError, PayloadValidator

__all__ = ["AgentRegistrar", "PayloadValidationError", "PayloadValidator"]
