"""examples/a2a_call.py: an outside A2A client calls the hello example tool through the gateway."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.e2e.gateway.conftest import BINDINGS, OTHER_TENANT, ROOT, TENANT, GatewayProcess


@pytest.mark.parametrize("binding", BINDINGS)
def test_the_a2a_example_greets_through_the_gateway(gateway: GatewayProcess, binding: str) -> None:
    result = subprocess.run(
        [sys.executable, "examples/a2a_call.py", "hello", '{"name": "Ada"}', "--binding", binding],
        env={**os.environ, "DISCO_GATEWAY_URL": gateway.url, "DISCO_TENANT_ID": TENANT},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert "card signature verified (key " in result.stdout  # the e2e gateways sign
    assert "Hello, Ada!" in result.stdout
    assert "is TASK_STATE_COMPLETED" in result.stdout


def _a2a_call(
    gateway: GatewayProcess, *args: str, tenant: str = TENANT, debug: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DISCO_DEBUG"}
    if debug:
        env["DISCO_DEBUG"] = "1"
    return subprocess.run(
        [sys.executable, "examples/a2a_call.py", *args],
        env={**env, "DISCO_GATEWAY_URL": gateway.url, "DISCO_TENANT_ID": tenant},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("binding", BINDINGS)
def test_the_a2a_example_prints_a_refusal_in_one_line(
    gateway: GatewayProcess, binding: str
) -> None:
    refused = _a2a_call(gateway, "hello", '{"nom": "Ada"}', "--binding", binding)

    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    assert refused.stderr.splitlines() == [
        "'hello' refused the call (InvalidParamsError): the message does not fit the request "
        "of 'hello': name: 'name' is a required property"
    ]


def test_the_a2a_example_with_a_token_of_another_tenant_says_agents_are_per_tenant(
    gateway: GatewayProcess,
) -> None:
    elsewhere = _a2a_call(gateway, "gw-echo", "hi", tenant=OTHER_TENANT)
    debugged = _a2a_call(gateway, "gw-echo", "hi", tenant=OTHER_TENANT, debug=True)

    assert elsewhere.returncode == 1
    (line,) = elsewhere.stderr.splitlines()
    assert line.startswith(
        f"no card for 'gw-echo': there is no agent 'gw-echo' in tenant {OTHER_TENANT!r}"
    )
    assert "Agents are registered per tenant" in line
    assert "Traceback" in debugged.stderr  # DISCO_DEBUG=1 shows it
