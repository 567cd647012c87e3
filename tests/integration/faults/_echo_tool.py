"""An echo Tool process for the broker-fault tests: ``python -m ... BOOTSTRAP PREFIX``.

It serves until SIGTERM (``Tool.serve``), answering ``echo.requested`` with the
request's data; prints ``serving`` once its handlers are set up (the broker may
still be down then).
"""

from __future__ import annotations

import sys
from typing import Any

from disco import Tool
from disco.settings import BusSettings


def main(bootstrap: str, prefix: str) -> None:
    settings = BusSettings(
        kafka_bootstrap=bootstrap,
        topic_prefix=prefix,
        kafka_session_timeout_ms=2000,
        kafka_heartbeat_interval_ms=300,
        kafka_fetch_max_wait_ms=20,
        bus_reconnect_backoff_max_seconds=1.0,
    )
    tool = Tool("echo", bus_settings=settings, register=False, validate_requests=False)

    @tool.on_invoke("echo.requested")
    async def echo(request: Any) -> dict[str, Any]:
        """Answers with the request's data."""
        return {"echo": request.data}

    print("serving", flush=True)
    tool.serve()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
