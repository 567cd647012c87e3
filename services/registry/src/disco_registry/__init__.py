"""disco_registry: the registry service.

Agents, capabilities, event definitions, payload schemas and liveness.

Run it with ``python -m disco_registry`` (host ``DISCO_HOST``, port
``DISCO_REGISTRY_PORT``, default 8081); every other setting is a shared
``DISCO_*`` variable of :class:`disco_service.ServiceSettings`.
"""

from disco_registry.main import create_app, main
from disco_registry.settings import RegistrySettings

__all__ = ["RegistrySettings", "create_app", "main"]
