"""Call a disco agent from outside, as any A2A v1.0 client does: through the gateway.

    uv run python examples/hello_tool.py &                     # an agent to call
    uv run python examples/a2a_call.py hello '{"name": "Ada"}'   # JSON: a data part
    uv run python examples/a2a_call.py assistant "What is the weather in Atlantis?"  # text
    uv run python examples/a2a_call.py --binding GRPC hello '{"name": "Bo"}'  # over gRPC

It fetches the agent's card (``/a2a/<agent>/.well-known/agent-card.json``),
checks its signature against the gateway's keys (``/.well-known/jwks.json``)
when it is signed, creates an a2a-sdk client for it with a dev token
(``disco token``'s), streams the task's events as they come, then reads the
task back. ``--binding
HTTP+JSON`` picks the REST binding instead of JSON-RPC, ``--binding GRPC`` the
gRPC one (at the address the card names; ``--grpc-tls`` for one behind TLS);
``--gateway`` another gateway than the local one (``DISCO_GATEWAY_URL``).
A refusal (no such agent for the token's tenant, a message that does not fit
the agent's request) is printed as one line, exit status 1; ``DISCO_DEBUG=1``
shows the traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid

import grpc
import grpc.aio
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import AgentCardResolutionError
from a2a.types import AgentCard, a2a_pb2
from a2a.utils.errors import A2AError
from a2a.utils.signing import (
    InvalidSignaturesError,
    SignatureVerificationError,
    create_signature_verifier,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from jwt import PyJWK

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco_common.auth import Role

_ALGORITHMS = ["ES256", "ES384", "ES512", "RS256", "EdDSA"]


def message(content: str) -> a2a_pb2.Message:
    """A user message: JSON becomes a data part, anything else a text part."""
    try:
        data = json.loads(content)
    except ValueError:
        data = None
    part = {"data": data} if isinstance(data, dict) else {"text": content}
    return ParseDict(
        {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [part]}, a2a_pb2.Message()
    )


def _with_token(details: grpc.aio.ClientCallDetails, token: str) -> grpc.aio.ClientCallDetails:
    header = ("authorization", f"Bearer {token}")
    return details._replace(metadata=grpc.aio.Metadata(*(details.metadata or ()), header))


class _UnaryBearer(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Sends the token with each call on a channel without TLS (call credentials need TLS)."""

    def __init__(self, token: str) -> None:
        self.token = token

    async def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        return await continuation(_with_token(details, self.token), request)


class _StreamBearer(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """The same for streams (a channel takes an interceptor for one kind of call only)."""

    def __init__(self, token: str) -> None:
        self.token = token

    async def intercept_unary_stream(self, continuation, details, request):  # type: ignore[no-untyped-def]
        return await continuation(_with_token(details, self.token), request)


def grpc_channel(address: str, token: str, *, tls: bool) -> grpc.aio.Channel:
    """A channel to the gateway's gRPC binding that sends ``token`` with every call."""
    if tls:
        credentials = grpc.composite_channel_credentials(
            grpc.ssl_channel_credentials(), grpc.access_token_call_credentials(token)
        )
        return grpc.aio.secure_channel(address, credentials)
    return grpc.aio.insecure_channel(
        address, interceptors=[_UnaryBearer(token), _StreamBearer(token)]
    )


class Refused(Exception):
    """The gateway or the agent said no, in its own words (one line for a person)."""


async def _card(http: httpx.AsyncClient, gateway: str, agent: str) -> AgentCard:
    """The agent's card; when there is none, the gateway's own reason."""
    try:
        return await A2ACardResolver(http, f"{gateway}/a2a/{agent}").get_agent_card()
    except AgentCardResolutionError as exc:
        answer = await http.get(f"{gateway}/a2a/{agent}/.well-known/agent-card.json")
        try:
            reason = answer.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            reason = " ".join(str(exc).split())
        raise Refused(f"no card for {agent!r}: {reason}") from exc


async def call(
    agent: str, content: str, *, gateway: str, binding: str, tenant: str, grpc_tls: bool = False
) -> None:
    token = mint_dev_token(DEV_AUTH_SECRET, tenant, "a2a-example", [Role.USER])
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        card = await _card(http, gateway, agent)
        print(f"{card.name}: {card.description}")
        if card.signatures:
            # The keys are the gateway's own: a card naming keys elsewhere (its jku) is
            # not believed on its word.
            keys = (await http.get(f"{gateway}/.well-known/jwks.json")).json()["keys"]
            used: list[str] = []

            def key_of(kid: str | None, jku: str | None) -> PyJWK:
                used.append(str(kid))
                for key in keys:
                    if key["kid"] == kid:
                        return PyJWK(key)
                raise InvalidSignaturesError(f"the gateway publishes no key {kid!r}")

            create_signature_verifier(key_of, _ALGORITHMS)(card)  # raises unless it holds
            print(f"card signature verified (key {used[-1]})")
        config = ClientConfig(
            httpx_client=http,
            supported_protocol_bindings=[binding],
            grpc_channel_factory=lambda address: grpc_channel(address, token, tls=grpc_tls),
        )
        client = ClientFactory(config).create(card)
        task_id = None
        request = a2a_pb2.SendMessageRequest(message=message(content))
        async for event in client.send_message(request):
            kind = event.WhichOneof("payload")
            print(f"-- {kind}: {json.dumps(MessageToDict(getattr(event, str(kind))))}")
            if kind == "task":
                task_id = event.task.id
        if task_id is not None:
            task = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
            print(f"task {task.id} is {a2a_pb2.TaskState.Name(task.status.state)}")
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("agent", help="the agent's name, e.g. hello")
    parser.add_argument("content", help="JSON for a data part, or text")
    parser.add_argument(
        "--gateway", default=os.environ.get("DISCO_GATEWAY_URL", "http://127.0.0.1:8080")
    )
    parser.add_argument("--binding", choices=["JSONRPC", "HTTP+JSON", "GRPC"], default="JSONRPC")
    parser.add_argument("--grpc-tls", action="store_true", help="the gRPC address is behind TLS")
    parser.add_argument("--tenant", default=os.environ.get("DISCO_TENANT_ID", "default"))
    args = parser.parse_args()
    try:
        asyncio.run(
            call(
                args.agent,
                args.content,
                gateway=args.gateway,
                binding=args.binding,
                tenant=args.tenant,
                grpc_tls=args.grpc_tls,
            )
        )
    except Exception as exc:
        # A refusal is one line a person can act on; DISCO_DEBUG=1 shows the traceback.
        if os.environ.get("DISCO_DEBUG", "").lower() in {"1", "true", "yes", "on"}:
            raise
        sys.exit(_one_line(exc, args.agent, args.gateway))


def _one_line(exc: Exception, agent: str, gateway: str) -> str:
    """What went wrong, in one line (the server's own words for a refusal)."""
    if isinstance(exc, Refused):
        return str(exc)
    if isinstance(exc, SignatureVerificationError):
        return f"the card of {agent!r} does not verify: {exc}"
    if isinstance(exc, A2AError):  # the gateway or the agent refused the call
        return f"{agent!r} refused the call ({type(exc).__name__}): {' '.join(exc.message.split())}"
    if isinstance(exc, httpx.TransportError):
        return f"cannot reach the gateway at {gateway} ({exc!r}): is the stack up (`make dev`)?"
    return f"error: {type(exc).__name__}: {' '.join(str(exc).split())} (DISCO_DEBUG=1 shows more)"


if __name__ == "__main__":
    main()
