"""Bearer-token auth: HS256 in dev, JWKS in production, and the on-behalf-of rules."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from disco.auth import DEV_AUTH_SECRET
from disco_common.auth import ON_BEHALF_OF_TENANT_HEADER, ON_BEHALF_OF_USER_HEADER, Role
from disco_service import ServiceSettings
from tests.integration.kit.support import bearer, build_app, serve

PRODUCTION_SECRET = "a-production-secret-of-at-least-32-characters"


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    values: dict[str, Any] = {
        "sub": "alice",
        "tenant_id": "acme",
        "user_id": "alice",
        "roles": ["user"],
        "iat": now,
        "exp": now + 300,
    }
    values.update(overrides)
    return values


async def test_a_dev_token_identifies_its_tenant_and_user(client: httpx.AsyncClient) -> None:
    response = await client.get("/whoami", headers=bearer("acme", "alice"))
    assert response.status_code == 200
    assert response.json() == {
        "tenant_id": "acme",
        "user_id": "alice",
        "sub": "alice",
        "roles": ["user"],
        "on_behalf_of": False,
    }


async def test_an_expired_token_is_refused(client: httpx.AsyncClient) -> None:
    token = jwt.encode(claims(exp=int(time.time()) - 3600), DEV_AUTH_SECRET, algorithm="HS256")
    response = await client.get("/whoami", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "The bearer token has expired."
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


async def test_a_token_signed_with_another_secret_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.get(
        "/whoami", headers=bearer(secret="someone-elses-secret-of-32-characters-x")
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"


async def test_an_unsigned_token_is_refused(client: httpx.AsyncClient) -> None:
    token = jwt.encode(claims(), key=None, algorithm="none")
    response = await client.get("/whoami", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401


async def test_a_token_without_disco_claims_is_refused(client: httpx.AsyncClient) -> None:
    token = jwt.encode(claims(tenant_id=None), DEV_AUTH_SECRET, algorithm="HS256")
    response = await client.get("/whoami", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401
    assert response.json()["error"]["details"]


async def test_a_garbage_token_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.get("/whoami", headers={"Authorization": "Bearer not-a-jwt"})
    assert response.status_code == 401


async def test_an_admin_may_call_an_admin_route(client: httpx.AsyncClient) -> None:
    response = await client.get("/admin/ping", headers=bearer(roles=[Role.USER, Role.ADMIN]))
    assert response.status_code == 200


async def test_a_service_caller_acts_for_the_tenant_and_user_it_names(
    client: httpx.AsyncClient,
) -> None:
    headers = bearer("platform", "router-agent", [Role.SERVICE])
    headers[ON_BEHALF_OF_TENANT_HEADER] = "globex"
    headers[ON_BEHALF_OF_USER_HEADER] = "hank"
    response = await client.get("/whoami", headers=headers)
    assert response.status_code == 200
    assert response.json() == {
        "tenant_id": "globex",
        "user_id": "hank",
        "sub": "router-agent",
        "roles": ["service"],
        "on_behalf_of": True,
    }


async def test_a_user_caller_cannot_act_for_another_tenant(client: httpx.AsyncClient) -> None:
    headers = bearer("acme", "alice")
    headers[ON_BEHALF_OF_TENANT_HEADER] = "globex"
    headers[ON_BEHALF_OF_USER_HEADER] = "hank"
    response = await client.get("/whoami", headers=headers)
    assert response.status_code == 200
    assert (response.json()["tenant_id"], response.json()["user_id"]) == ("acme", "alice")
    assert response.json()["on_behalf_of"] is False


async def test_a_service_caller_naming_a_malformed_tenant_gets_a_400(
    client: httpx.AsyncClient,
) -> None:
    headers = bearer("platform", "router-agent", [Role.SERVICE])
    headers[ON_BEHALF_OF_TENANT_HEADER] = "not a tenant!"
    response = await client.get("/whoami", headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_request"


# -- JWKS (production) ----------------------------------------------------------


class _JwksServer:
    """Serves one JWKS document on 127.0.0.1 and counts how often it was fetched."""

    def __init__(self, document: dict[str, Any]) -> None:
        body = json.dumps(document).encode()
        self.fetches = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.fetches += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/.well-known/jwks.json"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> _JwksServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def jwks_server(signing_key: rsa.RSAPrivateKey) -> Iterator[_JwksServer]:
    public = json.loads(RSAAlgorithm.to_jwk(signing_key.public_key()))
    public.update({"kid": "key-1", "use": "sig", "alg": "RS256"})
    with _JwksServer({"keys": [public]}) as server:
        yield server


@pytest.fixture
def production_settings(
    make_settings: Callable[..., ServiceSettings], jwks_server: _JwksServer
) -> ServiceSettings:
    return make_settings(
        env="production",
        auth_jwks_url=jwks_server.url,
        auth_audience="disco",
        auth_issuer="https://idp.example",
        database_url=make_settings().database_url.replace("disco_app:disco_app", "disco_app:x1"),
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge_hs256(payload: dict[str, Any], secret: bytes) -> str:
    # By hand: PyJWT itself refuses to HMAC with a public key.
    signing_input = ".".join(
        _b64(json.dumps(part).encode()) for part in ({"alg": "HS256", "typ": "JWT"}, payload)
    )
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


def rs256(key: rsa.RSAPrivateKey, **overrides: Any) -> str:
    return jwt.encode(
        claims(aud="disco", iss="https://idp.example", **overrides),
        key,
        algorithm="RS256",
        headers={"kid": "key-1"},
    )


async def test_production_accepts_a_token_signed_by_a_key_in_the_jwks(
    production_settings: ServiceSettings,
    kit_schema: str,
    signing_key: rsa.RSAPrivateKey,
    jwks_server: _JwksServer,
) -> None:
    app = build_app(production_settings, kit_schema, database=False, bus=False, outbox=False)
    async with serve(app) as http:
        first = await http.get("/whoami", headers={"Authorization": f"Bearer {rs256(signing_key)}"})
        second = await http.get(
            "/whoami", headers={"Authorization": f"Bearer {rs256(signing_key, sub='bob')}"}
        )
    assert (first.status_code, second.status_code) == (200, 200)
    assert first.json()["tenant_id"] == "acme"
    assert jwks_server.fetches == 1  # the key set is cached


async def test_production_refuses_a_token_from_a_key_not_in_the_jwks(
    production_settings: ServiceSettings, kit_schema: str
) -> None:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    app = build_app(production_settings, kit_schema, database=False, bus=False, outbox=False)
    async with serve(app) as http:
        response = await http.get("/whoami", headers={"Authorization": f"Bearer {rs256(stranger)}"})
    assert response.status_code == 401


async def test_production_refuses_a_token_for_another_audience(
    production_settings: ServiceSettings, kit_schema: str, signing_key: rsa.RSAPrivateKey
) -> None:
    token = jwt.encode(
        claims(aud="someone-else", iss="https://idp.example"),
        signing_key,
        algorithm="RS256",
        headers={"kid": "key-1"},
    )
    app = build_app(production_settings, kit_schema, database=False, bus=False, outbox=False)
    async with serve(app) as http:
        response = await http.get("/whoami", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401


async def test_production_with_only_a_jwks_refuses_dev_tokens(
    production_settings: ServiceSettings, kit_schema: str
) -> None:
    app = build_app(production_settings, kit_schema, database=False, bus=False, outbox=False)
    async with serve(app) as http:
        response = await http.get("/whoami", headers=bearer())
    assert response.status_code == 401


async def test_a_jwks_public_key_cannot_be_used_as_an_hmac_secret(
    make_settings: Callable[..., ServiceSettings],
    kit_schema: str,
    signing_key: rsa.RSAPrivateKey,
    jwks_server: _JwksServer,
) -> None:
    # The classic algorithm-confusion attack: an HS256 token "signed" with the
    # public key. Keys only ever verify their own kind of algorithm.
    public_pem = signing_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    settings = make_settings(auth_jwks_url=jwks_server.url, auth_secret=PRODUCTION_SECRET)
    forged = forge_hs256(claims(), public_pem)
    app = build_app(settings, kit_schema, database=False, bus=False, outbox=False)
    async with serve(app) as http:
        response = await http.get("/whoami", headers={"Authorization": f"Bearer {forged}"})
    assert response.status_code == 401
