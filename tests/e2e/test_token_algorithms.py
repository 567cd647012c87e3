"""Every service accepts tokens signed with the configured algorithms only.

The services of the e2e stack (registry, memory, tracker as real processes, and
the gateway in :mod:`tests.e2e.gateway`) verify with the dev secret and the
default ``DISCO_AUTH_ALGORITHMS`` (HS256, RS256, ES256): a token signed with
that very secret under HS512 is refused like a forged one (401 with the error
shape), while the same claims under HS256 are served.
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.e2e.conftest import TENANT, USER, Stack
from tests.fixtures.tokens import signed_with_the_dev_secret

# One authenticated read of each service.
READS = {
    "registry": "/v1/agents",
    "memory": "/v1/memory/steps/any-group/any-envelope",
    "tracker": "/v1/tracker/plans",
}


def _token(algorithm: str) -> str:
    now = int(time.time())
    claims = {
        "sub": USER,
        "tenant_id": TENANT,
        "user_id": USER,
        "roles": ["user"],
        "iat": now,
        "exp": now + 300,
    }
    return signed_with_the_dev_secret(claims, algorithm)


@pytest.mark.parametrize("service", sorted(READS))
async def test_a_token_signed_with_an_algorithm_not_configured_is_refused(
    e2e_stack: Stack, service: str
) -> None:
    url = f"{e2e_stack.urls[service]}{READS[service]}"
    async with httpx.AsyncClient(timeout=30) as http:
        hs512 = await http.get(url, headers={"Authorization": f"Bearer {_token('HS512')}"})
        hs384 = await http.get(url, headers={"Authorization": f"Bearer {_token('HS384')}"})
        hs256 = await http.get(url, headers={"Authorization": f"Bearer {_token('HS256')}"})

    assert (hs512.status_code, hs384.status_code, hs256.status_code) == (401, 401, 200)
    error = hs512.json()["error"]
    assert error["code"] == "unauthenticated"
    assert "HS512" in error["message"]
    assert 'error="invalid_token"' in hs512.headers["www-authenticate"]
