"""disco_memory: the memory service.

Working memory, task and plan context, plans, sessions,
semantic/episodic/procedural memory and agent-state snapshots.

Run it with ``python -m disco_memory`` (host ``DISCO_HOST``, port
``DISCO_MEMORY_PORT``, default 8082); every other setting is a shared
``DISCO_*`` variable of :class:`disco_service.ServiceSettings`.
"""

from disco_memory.main import create_app, main
from disco_memory.settings import MemorySettings

__all__ = ["MemorySettings", "create_app", "main"]
