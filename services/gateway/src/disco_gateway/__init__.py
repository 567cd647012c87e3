"""disco_gateway: the gateway service.

A2A endpoints, UI session streams, the HTTP publish bridge and the A2A task
store.

Run it with ``python -m disco_gateway`` (host ``DISCO_HOST``, port
``DISCO_GATEWAY_PORT``, default 8080); every other setting is a shared
``DISCO_*`` variable of :class:`disco_service.ServiceSettings`.
"""

from disco_gateway.main import create_app, main
from disco_gateway.settings import GatewaySettings

__all__ = ["GatewaySettings", "create_app", "main"]
