"""disco_gateway: the gateway service, the door for outside systems.

The A2A v1.0 endpoints (JSON-RPC and HTTP+JSON, SSE streams, push
notifications, the A2A task store) on the official a2a-sdk, the agent cards,
and the HTTP publish bridge.

Run it with ``python -m disco_gateway`` (host ``DISCO_HOST``, port
``DISCO_GATEWAY_PORT``, default 8080); its own settings are ``DISCO_GATEWAY_*``
(:class:`GatewaySettings`), the rest shared ``DISCO_*`` ones.
"""

import os

# The a2a-sdk traces every method of its handler, queues and stores when
# OpenTelemetry is installed: several spans per event of every task, which cost
# more than the task itself. The gateway's server spans (and the traceparent
# carried onto the bus) are kept; set the variable to true to see the sdk's too.
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

from disco_gateway.main import create_app, main
from disco_gateway.settings import GatewaySettings

__all__ = ["GatewaySettings", "create_app", "main"]
