"""``disco asyncapi`` as a process against the registry on a real port: write the
document, then check a saved one as the bus changes (an added optional field is
compatible, an added required field breaks, exit code 1)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml
from starlette.types import ASGIApp

from disco._dev.ports import free_port
from disco.clients import RegistryClient
from disco_common.registry import PayloadSchemaCreate
from tests.fixtures.bus_agents import (
    ORDER_SHIPPED_V1,
    ORDER_SHIPPED_V2,
    planner,
    register_bus,
    ttl,
)
from tests.integration.registry.support import new_tenant, unique, uvicorn_server

REPO = Path(__file__).resolve().parents[3]


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest_asyncio.fixture(loop_scope="module")
async def registry_url(registry_app: ASGIApp) -> AsyncIterator[str]:
    """The module's registry on a loopback port, as a process talks to it."""
    port = free_port()
    async with uvicorn_server(registry_app, port):
        yield f"http://127.0.0.1:{port}"


async def disco(url: str, tenant: str, *args: str, cwd: Path) -> Run:
    """``disco ...`` as its own process (the registry runs in this event loop: not blocked)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "disco._cli.main",
        *args,
        cwd=cwd,
        env={
            **os.environ,
            "DISCO_REGISTRY_URL": url,
            "DISCO_TENANT_ID": tenant,
            "COLUMNS": "200",
            "NO_COLOR": "1",
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


def with_weight(required: bool) -> dict[str, Any]:
    schema = {**ORDER_SHIPPED_V2}
    if required:
        schema["required"] = [*ORDER_SHIPPED_V1["required"], "weight_kg"]
        schema["examples"] = [{**ORDER_SHIPPED_V1["examples"][0], "weight_kg": 1.5}]
    return schema


async def test_a_saved_document_checks_compatible_then_breaking_as_the_bus_changes(
    registry_url: str, make_client: Callable[..., RegistryClient], tmp_path: Path
) -> None:
    tenant = new_tenant()
    async with make_client(tenant) as client:
        names = await register_bus(client)

    wrote = await disco(registry_url, tenant, "asyncapi", "--yaml", "-o", "bus.yaml", cwd=tmp_path)
    assert wrote.code == 0, wrote.err
    saved = yaml.safe_load((tmp_path / "bus.yaml").read_text())
    assert saved["info"]["x-disco-tenant"] == tenant
    assert "wrote bus.yaml: " in wrote.err

    unchanged = await disco(registry_url, tenant, "asyncapi", "--check", "bus.yaml", cwd=tmp_path)
    assert (unchanged.code, unchanged.out.strip()) == (0, "bus.yaml matches the live bus.")

    # The planner moves to a schema version with an added optional field: compatible.
    async with make_client(tenant) as client:
        await client.create_schema(
            PayloadSchemaCreate(
                name="order.shipped", version="1.1.0", json_schema=with_weight(required=False)
            )
        )
        await client.register(ttl(planner(names["planner"], schema_version="1.1.0").registration()))
    compatible = await disco(registry_url, tenant, "asyncapi", "--check", "bus.yaml", cwd=tmp_path)
    assert compatible.code == 0, compatible.out + compatible.err
    assert (
        "~ changed  order.shipped (business-facts): order.shipped@1.0.0 → order.shipped@1.1.0"
        in (compatible.out)
    )
    assert "compatible: weight_kg: optional field `weight_kg` added" in compatible.out
    assert "No breaking change (1 changed)." in compatible.out

    # Then to one where that field is required: senders built on bus.yaml break.
    async with make_client(tenant) as client:
        await client.create_schema(
            PayloadSchemaCreate(
                name="order.shipped", version="2.0.0", json_schema=with_weight(required=True)
            )
        )
        await client.register(ttl(planner(names["planner"], schema_version="2.0.0").registration()))
    breaking = await disco(registry_url, tenant, "asyncapi", "--check", "bus.yaml", cwd=tmp_path)
    assert breaking.code == 1, breaking.out + breaking.err
    assert "BREAKING for senders: weight_kg: field `weight_kg` added, required" in breaking.out
    assert "1 breaking (order.shipped)" in breaking.err


async def test_a_document_narrowed_to_an_agent_is_checked_narrowed_the_same_way(
    registry_url: str, make_client: Callable[..., RegistryClient], tmp_path: Path
) -> None:
    tenant = new_tenant()
    async with make_client(tenant) as client:
        names = await register_bus(client)

    printed = await disco(
        registry_url, tenant, "asyncapi", "--agent", names["worker"], cwd=tmp_path
    )
    assert printed.code == 0, printed.err
    (tmp_path / "worker.json").write_text(printed.out)
    assert json.loads(printed.out)["info"]["x-disco-filter"]["agent"] == names["worker"]

    # Another agent comes: it is not part of the worker's document, so nothing changed.
    async with make_client(tenant) as client:
        await client.register(ttl(planner(unique("other-planner")).registration()))
    checked = await disco(registry_url, tenant, "asyncapi", "--check", "worker.json", cwd=tmp_path)
    assert (checked.code, checked.out.strip()) == (0, "worker.json matches the live bus.")


async def test_mistakes_exit_2_with_what_to_do(
    registry_url: str, make_client: Callable[..., RegistryClient], tmp_path: Path
) -> None:
    tenant = new_tenant()
    async with make_client(tenant) as client:
        names = await register_bus(client)
    (tmp_path / "notes.txt").write_text("- just\n- a list\n")

    unknown = await disco(registry_url, tenant, "asyncapi", "--agent", "nobody", cwd=tmp_path)
    missing = await disco(registry_url, tenant, "asyncapi", "--check", "gone.yaml", cwd=tmp_path)
    not_one = await disco(registry_url, tenant, "asyncapi", "--check", "notes.txt", cwd=tmp_path)
    both = await disco(
        registry_url, tenant, "asyncapi", "--check", "notes.txt", "-o", "x.json", cwd=tmp_path
    )
    down = await disco("http://127.0.0.1:9", tenant, "asyncapi", cwd=tmp_path)

    assert unknown.code == 2
    assert "no live agent 'nobody'" in unknown.err
    assert names["worker"] in unknown.err
    assert missing.code == 2
    assert "cannot read gone.yaml" in missing.err
    assert not_one.code == 2
    assert "notes.txt is not an AsyncAPI document" in not_one.err
    assert both.code == 2
    assert "neither --output nor --yaml" in both.err
    assert down.code == 2
    assert "could not be reached" in down.err
