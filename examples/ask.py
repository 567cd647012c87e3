"""Send a request to the agents on the bus and print the answer.

    uv run python examples/ask.py EVENT_TYPE ['{"json": "data"}'] [--wait SECONDS]

The answer is published to ``--response-event`` (default: the request's type
with ``.requested`` replaced by ``.answered``); this script waits for it.
Settings come from ``DISCO_*`` variables (the defaults reach ``make dev``); the
request is made for the tenant ``DISCO_TENANT_ID``, the one the services see
the agents act for (so its questions to humans show in that tenant's inbox).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from disco.bus import BusClient, BusUnavailableError, RequestTimeout
from disco.clients import ServiceClientSettings
from disco.settings import BusSettings


def default_response_event(event_type: str) -> str:
    base = event_type.removesuffix(".requested")
    return f"{base}.answered"


async def ask(event_type: str, data: object, response_event: str, wait: float) -> int:
    tenant = ServiceClientSettings().tenant_id
    try:
        async with BusClient(BusSettings(), name="ask") as bus:
            answer = await bus.request(
                event_type, data, response_event=response_event, wait=wait, tenant_id=tenant
            )
    except RequestTimeout as exc:
        print(f"no answer: {exc}", file=sys.stderr)
        return 1
    except BusUnavailableError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps(answer.data, indent=2))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("event_type", help="the request's event type, e.g. hello.requested")
    parser.add_argument("data", nargs="?", default="{}", help="the request data as JSON")
    parser.add_argument("--response-event", help="the event type to be answered with")
    parser.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the answer")
    args = parser.parse_args()
    try:
        data = json.loads(args.data)
    except json.JSONDecodeError as exc:
        parser.error(f"the data is not JSON: {exc}")
    response_event = args.response_event or default_response_event(args.event_type)
    return asyncio.run(ask(args.event_type, data, response_event, args.wait))


if __name__ == "__main__":
    sys.exit(main())
