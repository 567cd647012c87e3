"""Benchmark: what tenant credentials cost, beside the unsigned path, in one run.

    uv run python bench/credentials.py [--messages 20000] [--repeats 3] [--ops 100000]

Starts an embedded Tansu broker on a free loopback port unless
DISCO_KAFKA_BOOTSTRAP names one. Prints two tables:

- per operation (no broker): signing a record (the producer's cached token as
  a header), checking an envelope whose credential was seen before (the
  common case: one credential per producer, renewed every
  ``bus_credential_ttl_seconds``), and checking one never seen before (an
  HS256 signature check and claims validation, then remembered);
- publish -> handler throughput through ``BusConsumer`` (3 partitions, one
  consumer group): unsigned with verification off (dev), signed with
  verification off (the header's bytes), signed with verification required.

Rates are the best of ``--repeats`` alternating runs (the machine may be shared).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid

from _common import scratch_broker
from pydantic import SecretStr

from disco.auth import DevTokenMinter, mint_dev_token
from disco.bus import BusClient, BusConsumer, CredentialSigner, CredentialVerifier, TenantGuard
from disco.bus._wire import record_for
from disco.settings import BusSettings
from disco_common.auth import TENANT_CREDENTIAL_HEADER, Role
from disco_common.envelope import BusinessFact, Envelope

SECRET = "bench-secret-0123456789abcdef0123456789abcdef"
PAYLOAD = {"blob": "x" * 189}  # 200 bytes as JSON
WINDOW = 2000


async def _per_op(ops: int) -> dict[str, float]:
    """Microseconds per operation of each step."""
    settings = BusSettings(auth_secret=SecretStr(SECRET), bus_require_tenant_credential=True)
    envelope = BusinessFact(
        source="urn:bench", type="bench.happened", tenant_id="acme", data=PAYLOAD
    )
    signer = CredentialSigner(DevTokenMinter(SECRET, tenant_id="acme", user_id="bench"))
    figures: dict[str, float] = {}

    started = time.perf_counter()
    for _ in range(ops):
        record_for(envelope)
    figures["record, unsigned"] = (time.perf_counter() - started) / ops * 1e6
    started = time.perf_counter()
    for _ in range(ops):
        record_for(envelope, await signer.header())
    figures["record, signed"] = (time.perf_counter() - started) / ops * 1e6

    guard = TenantGuard(CredentialVerifier(settings))
    headers = [*envelope.kafka_headers(), await signer.header()]
    assert await guard.refusal("acme", headers) is None
    started = time.perf_counter()
    for _ in range(ops):
        await guard.refusal("acme", headers)
    figures["check, credential seen before"] = (time.perf_counter() - started) / ops * 1e6

    distinct = max(1000, ops // 20)
    tokens = [
        mint_dev_token(SECRET, "acme", f"user-{n}", [Role.USER], ttl_seconds=600)
        for n in range(distinct)
    ]
    fresh = TenantGuard(CredentialVerifier(settings, capacity=distinct + 1))
    started = time.perf_counter()
    for token in tokens:
        await fresh.refusal("acme", [(TENANT_CREDENTIAL_HEADER, token.encode())])
    figures["check, new credential"] = (time.perf_counter() - started) / distinct * 1e6
    return figures


async def _publish_handle(settings: BusSettings, n: int, *, sign: bool) -> float:
    async with BusClient(settings, name="bench", sign=sign) as bus:
        await bus.ensure_topics(["bench"])
        seen = 0
        done = asyncio.Event()

        async def handle(envelope: Envelope) -> None:
            nonlocal seen
            seen += 1
            if seen >= n:
                done.set()

        consumer = BusConsumer(bus, f"bench-{uuid.uuid4().hex[:6]}")
        consumer.add_handler("bench", "bench.happened", handle)
        async with consumer:
            await consumer.wait_assigned(30)
            started = time.perf_counter()
            for start in range(0, n, WINDOW):
                acks = [
                    await bus.send("bench", "bench.happened", PAYLOAD, tenant_id="acme")
                    for _ in range(start, min(n, start + WINDOW))
                ]
                await asyncio.gather(*acks)
            await asyncio.wait_for(done.wait(), 300)
            return n / (time.perf_counter() - started)


CASES = {
    "unsigned, verification off": (False, False),
    "signed, verification off": (True, False),
    "signed, verification required": (True, True),
}
"""Throughput phases: name -> (producer signs, consumer requires credentials)."""


async def throughput(
    bootstrap: str, messages: int, repeats: int, *, progress: bool = True
) -> dict[str, float]:
    """Best publish -> handler rate (msg/s) of each of :data:`CASES` (bench/faults.py may
    call it beside its own figures)."""
    run = uuid.uuid4().hex[:6]
    phases = 0
    best: dict[str, float] = {}
    names = list(CASES)
    for attempt in range(1, repeats + 1):
        # Each attempt starts with another case: none always runs cold.
        shift = (attempt - 1) % len(names)
        for name in names[shift:] + names[:shift]:
            sign, required = CASES[name]
            phases += 1
            settings = BusSettings(
                kafka_bootstrap=bootstrap,
                topic_prefix=f"benchcred{run}.{phases}.",
                kafka_partitions=3,
                kafka_session_timeout_ms=2000,
                kafka_heartbeat_interval_ms=500,
                auth_secret=SecretStr(SECRET),
                bus_require_tenant_credential=required,
            )
            rate = await _publish_handle(settings, messages, sign=sign)
            best[name] = max(best.get(name, 0.0), rate)
            if progress:
                print(f"  [{attempt}] {name}: {rate:,.0f} msg/s", flush=True)
    return best


async def main(bootstrap: str, messages: int, repeats: int, ops: int) -> None:
    print(f"broker {bootstrap}; {ops:,} operations; {messages:,} messages, best of {repeats}")
    per_op = await _per_op(ops)
    print()
    print(f"{'per operation':34} {'µs':>8}")
    for name, micros in per_op.items():
        print(f"{name:34} {micros:>8.2f}")
    best = await throughput(bootstrap, messages, repeats)
    base = best["unsigned, verification off"]
    print()
    print(f"{'publish -> handler':34} {'msg/s':>10} {'vs unsigned':>12}")
    for name in CASES:
        rate = best[name]
        print(f"{name:34} {rate:>10,.0f} {rate / base:>12.2f}")


def cli() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=20_000, help="messages per phase")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each phase")
    parser.add_argument("--ops", type=int, default=100_000, help="operations per micro phase")
    args = parser.parse_args()
    with scratch_broker("credentials") as bootstrap:
        asyncio.run(main(bootstrap, args.messages, args.repeats, args.ops))


if __name__ == "__main__":
    sys.exit(cli())
