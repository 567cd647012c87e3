"""Signed agent cards: what the gateway signs, an a2a-sdk client verifies (and nothing else)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from a2a.types import a2a_pb2
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from google.protobuf.json_format import ParseDict
from jwt import PyJWK
from jwt.algorithms import ECAlgorithm
from pydantic import ValidationError

from disco_common.a2a_cards import A2AAgentCard, A2ACardSource, build_agent_card
from disco_common.registry import DiscoveredCapability, DiscoveredEvent
from disco_gateway import GatewaySettings
from disco_gateway.cards.signing import CardSigner, jwk_thumbprint, load_signing_key

GATEWAY = "https://agents.example.com"


def pem_of(key: Any) -> bytes:
    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def card() -> A2AAgentCard:
    """A card with every kind of member: schemas (nested objects), lists, non-ASCII text."""
    source = A2ACardSource(
        name="hello",
        description="Says hello to whoever it is given: «Grüß Gott».",
        tenant_id="acme",
        tags=["greeting"],
        capabilities=[
            DiscoveredCapability(
                task_name="hello",
                description="Greets by name",
                consumed_event=DiscoveredEvent(
                    event_type="hello.requested",
                    topic="action-requests",
                    json_schema={
                        "type": "object",
                        "properties": {"name": {"type": "string", "maxLength": 100}},
                        "required": ["name"],
                    },
                ),
            )
        ],
    )
    return build_agent_card(source, public_url=GATEWAY, tenant="acme")


def as_served(signed: A2AAgentCard) -> a2a_pb2.AgentCard:
    """What a client parses: the card's wire JSON, read as the a2a-sdk's type."""
    wire = json.loads(json.dumps(signed.to_wire()))
    return ParseDict(wire, a2a_pb2.AgentCard(), ignore_unknown_fields=True)


def verifier_for(signer: CardSigner, algorithm: str) -> Any:
    (jwk,) = signer.jwks()["keys"]

    def key_provider(kid: str | None, jku: str | None) -> PyJWK:
        assert (kid, jku) == (jwk["kid"], f"{GATEWAY}/.well-known/jwks.json")
        return PyJWK(jwk)

    return create_signature_verifier(key_provider, [algorithm])


@pytest.mark.parametrize(
    ("key", "algorithm"),
    [
        (ec.generate_private_key(ec.SECP256R1()), "ES256"),
        (ec.generate_private_key(ec.SECP384R1()), "ES384"),
        (rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256"),
        (ed25519.Ed25519PrivateKey.generate(), "EdDSA"),
    ],
    ids=["P-256", "P-384", "RSA", "Ed25519"],
)
def test_a_signed_card_as_served_verifies_with_the_published_key(key: Any, algorithm: str) -> None:
    signing_key = load_signing_key(pem_of(key))
    signer = CardSigner(signing_key, public_url=GATEWAY)

    signed = signer.sign(card())
    served = as_served(signed)
    verifier_for(signer, algorithm)(served)  # raises unless a signature holds

    (signature,) = signed.signatures or []
    header = json.loads(base64.urlsafe_b64decode(signature.protected + "=="))
    assert header == {
        "alg": algorithm,
        "kid": signing_key.kid,
        "jku": f"{GATEWAY}/.well-known/jwks.json",
        "typ": "JOSE",
    }
    assert signer.jwks()["keys"][0]["use"] == "sig"
    assert "d" not in signer.jwks()["keys"][0]  # never the private part


def test_a_card_changed_after_signing_fails_verification() -> None:
    signer = CardSigner(
        load_signing_key(pem_of(ec.generate_private_key(ec.SECP256R1()))), public_url=GATEWAY
    )
    served = as_served(signer.sign(card()))
    served.description = "Says hello, and sends your data elsewhere."

    with pytest.raises(InvalidSignaturesError):
        verifier_for(signer, "ES256")(served)


def test_the_extended_card_is_signed_as_the_sdks_type() -> None:
    signer = CardSigner(
        load_signing_key(pem_of(ec.generate_private_key(ec.SECP256R1())), kid="card-key-1"),
        public_url=GATEWAY,
    )
    proto = ParseDict(card().to_wire(), a2a_pb2.AgentCard())

    signed = signer.sign_proto(proto)

    verifier_for(signer, "ES256")(signed)
    assert signer.jwks()["keys"][0]["kid"] == "card-key-1"


@pytest.mark.parametrize("blank", [{}, {"card_signing_key": ""}, {"card_signing_key_file": " "}])
def test_without_a_key_cards_are_served_as_built_and_no_key_is_published(
    blank: dict[str, Any],
) -> None:
    signer = CardSigner.from_settings(GatewaySettings(env="dev", **blank))

    assert signer.sign(card()) == card()
    assert signer.jwks() == {"keys": []}


def test_the_kid_is_the_rfc_7638_thumbprint() -> None:
    # RFC 7638, section 3.1: the example RSA key and its thumbprint.
    jwk = {
        "kty": "RSA",
        "n": (
            "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSo"
            "c_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YG"
            "jQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt"
            "-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
        ),
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29",
    }

    assert jwk_thumbprint(jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_a_signing_key_is_read_from_a_file(tmp_path: Path) -> None:
    key_file = tmp_path / "card.pem"
    key_file.write_bytes(pem_of(ec.generate_private_key(ec.SECP256R1())))

    signer = CardSigner.from_settings(GatewaySettings(env="dev", card_signing_key_file=key_file))

    assert len(signer.jwks()["keys"]) == 1


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"card_signing_key": "not a key"}, "not an unencrypted PEM private key"),
        (
            {"card_signing_key": pem_of(rsa.generate_private_key(65537, 1024)).decode()},  # noqa: S505
            "fewer than 2048 bits",
        ),
        (
            {
                "card_signing_key": pem_of(ec.generate_private_key(ec.SECP256K1())).decode(),
            },
            "curve secp256k1 is not supported",
        ),
        (
            {"card_signing_key": "x", "card_signing_key_file": Path(__file__)},
            "not both",
        ),
        ({"card_signing_key_file": Path("/nonexistent/card.pem")}, "is not a file"),
    ],
    ids=["not-pem", "short-rsa", "curve", "both", "no-file"],
)
def test_a_signing_key_cards_cannot_be_signed_with_is_refused_at_startup(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        GatewaySettings(env="dev", **settings)


def test_a_card_signed_before_a_rotation_still_verifies_with_the_retired_key_published(
    tmp_path: Path,
) -> None:
    old = CardSigner(
        load_signing_key(pem_of(ec.generate_private_key(ec.SECP256R1()))), public_url=GATEWAY
    )
    signed_before = as_served(old.sign(card()))
    retired = tmp_path / "retired.json"
    retired.write_text(json.dumps(old.jwks()))  # the key set saved before the switch
    new_key = tmp_path / "new.pem"
    new_key.write_bytes(pem_of(ec.generate_private_key(ec.SECP256R1())))

    rotated = CardSigner.from_settings(
        GatewaySettings(env="dev", card_signing_key_file=new_key, card_retired_keys_file=retired)
    )
    keys = {key["kid"]: key for key in rotated.jwks()["keys"]}

    def key_provider(kid: str | None, jku: str | None) -> PyJWK:
        return PyJWK(keys[str(kid)])

    verify = create_signature_verifier(key_provider, ["ES256"])
    verify(signed_before)  # an old card
    verify(as_served(rotated.sign(card())))  # a new one
    assert len(keys) == 2
    assert next(iter(keys)) == rotated.jwks()["keys"][0]["kid"]  # the signing key first


def _ec_jwk(*, private: bool, kid: str | None) -> dict[str, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    jwk: dict[str, Any] = ECAlgorithm.to_jwk(key if private else key.public_key(), as_dict=True)
    return jwk if kid is None else {**jwk, "kid": kid}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("not json", "not a JSON Web Key Set"),
        ('{"keys": [{"kty": "EC"}]}', "not a JSON Web Key Set"),
        (json.dumps({"keys": [_ec_jwk(private=True, kid="k")]}), "is a private key"),
        (json.dumps({"keys": [_ec_jwk(private=False, kid=None)]}), "needs its kid"),
    ],
    ids=["not-json", "not-a-key", "private", "no-kid"],
)
def test_retired_keys_that_are_no_public_key_set_are_refused_at_startup(
    tmp_path: Path, document: str, message: str
) -> None:
    retired = tmp_path / "retired.json"
    retired.write_text(document)

    with pytest.raises(ValidationError, match=message):
        GatewaySettings(env="dev", card_retired_keys_file=retired)


def test_a_card_served_again_unchanged_keeps_its_signature_and_a_changed_one_is_signed_anew() -> (
    None
):
    signer = CardSigner(
        load_signing_key(pem_of(ec.generate_private_key(ec.SECP256R1()))), public_url=GATEWAY
    )
    first, again = signer.sign(card()), signer.sign(card())
    changed = signer.sign(card().model_copy(update={"description": "Says goodbye."}))

    assert again.signatures == first.signatures  # ECDSA would differ if signed anew
    assert changed.signatures != first.signatures
    verifier_for(signer, "ES256")(as_served(changed))


@pytest.mark.parametrize(
    ("key", "algorithm"),
    [
        (ec.generate_private_key(ec.SECP256R1()), "ES256"),
        (ec.generate_private_key(ec.SECP521R1()), "ES512"),
        (rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256"),
        (ed25519.Ed25519PrivateKey.generate(), "EdDSA"),
    ],
    ids=["P-256", "P-521", "RSA", "Ed25519"],
)
def test_two_instances_with_one_key_sign_a_card_alike(key: Any, algorithm: str) -> None:
    # Deterministic signatures (RFC 6979 for ECDSA): the same card, signed by another
    # instance or after a restart, is the same bytes, so its ETag does not change.
    pem = pem_of(key)
    one, other = (CardSigner(load_signing_key(pem), public_url=GATEWAY) for _ in range(2))

    def proto() -> a2a_pb2.AgentCard:
        return ParseDict(card().to_wire(), a2a_pb2.AgentCard())

    assert one.sign(card()).signatures == other.sign(card()).signatures
    by_one, by_other = one.sign_proto(proto()), other.sign_proto(proto())
    assert len(by_one.signatures) == 1
    assert by_one.signatures == by_other.signatures
    verifier_for(other, algorithm)(as_served(one.sign(card())))
