"""examples/a2a_call.py: an outside A2A client calls the hello example tool through the gateway."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.e2e.gateway.conftest import BINDINGS, ROOT, TENANT, GatewayProcess


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
