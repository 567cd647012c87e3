"""disco_tracker: the tracker service.

The read model of what runs: plans, tasks, fan-out groups, timelines, metrics, a
live feed, registered plan types, and timeouts of questions to humans.

Run it with ``python -m disco_tracker`` (host ``DISCO_HOST``, port
``DISCO_TRACKER_PORT``, default 8083); every other setting is a shared
``DISCO_*`` variable of :class:`disco_service.ServiceSettings`.
"""

from disco_tracker.main import create_app, main
from disco_tracker.settings import TrackerSettings

__all__ = ["TrackerSettings", "create_app", "main"]
