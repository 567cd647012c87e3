"""Signed agent cards (A2A v1.0 "Agent Card Signing").

With ``DISCO_GATEWAY_CARD_SIGNING_KEY`` (or ``..._KEY_FILE``) set, every card the
gateway serves carries a JWS signature: over the card's RFC 8785 canonical JSON
without its ``signatures``, detached, as the specification and the a2a-sdk's
``create_signature_verifier`` check it. The protected header names the key
(``kid``), its algorithm and where its public key is (``jku``: the gateway's
``/.well-known/jwks.json``). The algorithm follows the key: ES256/ES384/ES512
for EC P-256/P-384/P-521, RS256 for RSA, EdDSA for Ed25519. The ``kid`` is the
key's RFC 7638 thumbprint unless ``DISCO_GATEWAY_CARD_SIGNING_KEY_ID`` names one.
To rotate, keep the old public key published beside the new one for a while:
``DISCO_GATEWAY_CARD_RETIRED_KEYS_FILE`` names a JSON Web Key Set (the
``/.well-known/jwks.json`` saved before the switch will do).

Signing uses the a2a-sdk's ``create_agent_card_signer``, so the bytes signed
are the ones an a2a-sdk client canonicalizes and verifies. Signatures are
deterministic: ECDSA signs as RFC 6979 says (RSA PKCS#1 v1.5 and Ed25519 are so
already), so a card served again, by any instance, carries the very same
signature, and its ``ETag`` stays the same.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from a2a.types import a2a_pb2
from a2a.utils.signing import ProtectedHeader, create_agent_card_signer
from cryptography import utils
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt import PyJWK
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
from jwt.exceptions import PyJWTError

from disco_common.a2a_cards import A2AAgentCard, A2AAgentCardSignature
from disco_gateway.a2a.mapping import to_proto

__all__ = [
    "JWKS_PATH",
    "CardSigner",
    "DeterministicECKey",
    "SigningKey",
    "SigningSettings",
    "jwk_thumbprint",
    "load_retired_keys",
    "load_signing_key",
]

JWKS_PATH = "/.well-known/jwks.json"
_SIGNED_CARDS = 1024  # the signatures of the cards served last, by their content

_CURVES = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
# RFC 7638: the members of each key type a thumbprint covers.
_THUMBPRINT_MEMBERS = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"),
                       "OKP": ("crv", "kty", "x")}  # fmt: skip


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A private key that signs cards, with what a verifier needs to know of it."""

    pem: bytes
    algorithm: str
    kid: str
    public_jwk: dict[str, Any]


def load_signing_key(pem: bytes, *, kid: str | None = None) -> SigningKey:
    """The card signing key in ``pem`` (an unencrypted PKCS#8 or traditional PEM).

    Raises:
        ValueError: not a private key, or one of a kind cards are not signed with.
    """
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"the card signing key is not an unencrypted PEM private key: {exc}"
        ) from None
    jwk: dict[str, Any]
    if isinstance(key, ec.EllipticCurvePrivateKey):
        if key.curve.name not in _CURVES:
            raise ValueError(f"the card signing key's curve {key.curve.name} is not supported")
        algorithm = _CURVES[key.curve.name]
        jwk = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
    elif isinstance(key, rsa.RSAPrivateKey):
        if key.key_size < 2048:
            raise ValueError("the card signing key is an RSA key of fewer than 2048 bits")
        algorithm = "RS256"
        jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    elif isinstance(key, ed25519.Ed25519PrivateKey):
        algorithm = "EdDSA"
        jwk = OKPAlgorithm.to_jwk(key.public_key(), as_dict=True)
    else:
        raise ValueError("the card signing key must be an EC, RSA or Ed25519 key")
    kid = kid or jwk_thumbprint(jwk)
    return SigningKey(pem, algorithm, kid, {**jwk, "kid": kid, "alg": algorithm, "use": "sig"})


def jwk_thumbprint(jwk: dict[str, Any]) -> str:
    """The RFC 7638 thumbprint of a public JWK (SHA-256, base64url)."""
    members = {name: jwk[name] for name in _THUMBPRINT_MEMBERS[jwk["kty"]]}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True).encode()
    digest = hashlib.sha256(canonical).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def load_retired_keys(document: bytes) -> list[dict[str, Any]]:
    """The public keys of a JWKS document (``{"keys": [...]}``, e.g. an earlier
    ``/.well-known/jwks.json``), each with its ``kid``.

    Raises:
        ValueError: not such a document, a key without ``kid``, or a private key.
    """
    try:
        keys = json.loads(document)["keys"]
        if not isinstance(keys, list):
            raise TypeError("keys is not a list")
        for key in keys:
            PyJWK(key)  # a usable JWK of a supported kind
    except (ValueError, KeyError, TypeError, PyJWTError) as exc:
        raise ValueError(f"the retired card keys are not a JSON Web Key Set: {exc}") from None
    for key in keys:
        if not key.get("kid"):
            raise ValueError("every retired card key needs its kid")
        if "d" in key:
            raise ValueError(
                f"retired card key {key['kid']!r} is a private key: publish its public part"
            )
    return [dict(key) for key in keys]


class DeterministicECKey(ec.EllipticCurvePrivateKey):
    """An EC private key whose ECDSA signatures are deterministic (RFC 6979).

    ECDSA draws a random nonce for each signature, so a card signed twice has two
    signatures, both valid; with the nonce derived from the key and the message,
    the same card gets the same signature everywhere. Everything else is the
    wrapped key's.
    """

    def __init__(self, key: ec.EllipticCurvePrivateKey) -> None:
        self._key = key

    def sign(
        self, data: utils.Buffer, signature_algorithm: ec.EllipticCurveSignatureAlgorithm
    ) -> bytes:
        if isinstance(signature_algorithm, ec.ECDSA):
            signature_algorithm = ec.ECDSA(
                signature_algorithm.algorithm, deterministic_signing=True
            )
        return self._key.sign(data, signature_algorithm)

    def exchange(self, algorithm: ec.ECDH, peer_public_key: ec.EllipticCurvePublicKey) -> bytes:
        return self._key.exchange(algorithm, peer_public_key)

    def public_key(self) -> ec.EllipticCurvePublicKey:
        return self._key.public_key()

    @property
    def curve(self) -> ec.EllipticCurve:
        return self._key.curve

    @property
    def key_size(self) -> int:
        return self._key.key_size

    def private_numbers(self) -> ec.EllipticCurvePrivateNumbers:
        return self._key.private_numbers()

    def private_bytes(
        self,
        encoding: serialization.Encoding,
        format: serialization.PrivateFormat,
        encryption_algorithm: serialization.KeySerializationEncryption,
    ) -> bytes:
        return self._key.private_bytes(encoding, format, encryption_algorithm)

    def __copy__(self) -> DeterministicECKey:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> DeterministicECKey:
        return self


def _signing_key(pem: bytes) -> Any:
    """What the a2a-sdk's signer signs with: the PEM itself, or for an EC key the key made
    to sign deterministically (the signer hands the key to PyJWT, which takes key objects
    as well as PEM)."""
    key = serialization.load_pem_private_key(pem, password=None)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return DeterministicECKey(key)
    return pem


class SigningSettings(Protocol):
    """The settings a :class:`CardSigner` is made from
    (:class:`~disco_gateway.settings.GatewaySettings` satisfies it)."""

    @property
    def card_signing_key_id(self) -> str | None:
        """The ``kid`` of the signing key (None: its RFC 7638 thumbprint)."""
        ...

    @property
    def card_retired_keys_file(self) -> Path | None:
        """A JWKS of retired keys still published (None: none)."""
        ...

    @property
    def gateway_public_url(self) -> str:
        """The gateway's public URL (the ``jku`` of signatures)."""
        ...

    def card_signing_pem(self) -> bytes | None:
        """The signing key's PEM (None: cards are not signed)."""
        ...


class CardSigner:
    """Signs the cards the gateway serves (or leaves them as they are, with no key).

    Args:
        key: the signing key; None signs nothing.
        public_url: the gateway's public URL (the ``jku`` of each signature).
        retired: public keys that signed cards before this one, still published
            so that cards signed with them verify while callers hold them.
    """

    def __init__(
        self,
        key: SigningKey | None,
        *,
        public_url: str,
        retired: list[dict[str, Any]] | None = None,
    ) -> None:
        self._key = key
        self._retired = list(retired or [])
        self._signed: OrderedDict[str, list[A2AAgentCardSignature]] = OrderedDict()
        self._sign = None
        if key is not None:
            header: ProtectedHeader = {
                "alg": key.algorithm,
                "kid": key.kid,
                "jku": public_url.rstrip("/") + JWKS_PATH,
                "typ": "JOSE",
            }
            self._sign = create_agent_card_signer(_signing_key(key.pem), header)

    @classmethod
    def from_settings(cls, settings: SigningSettings) -> CardSigner:
        """The signer of ``DISCO_GATEWAY_CARD_SIGNING_KEY[_FILE]`` (none: signs nothing)."""
        pem = settings.card_signing_pem()
        key = None if pem is None else load_signing_key(pem, kid=settings.card_signing_key_id)
        retired_file = settings.card_retired_keys_file
        retired = None if retired_file is None else load_retired_keys(retired_file.read_bytes())
        return cls(key, public_url=settings.gateway_public_url, retired=retired)

    def sign(self, card: A2AAgentCard) -> A2AAgentCard:
        """``card`` with its signature (as served: the wire JSON of the model).

        A card served again unchanged keeps the signature it got: signing costs
        about 0.7 ms, and the public cards need no token to ask for.
        """
        if self._sign is None:
            return card
        content = card.model_dump_json()
        signatures = self._signed.get(content)
        if signatures is None:
            signed = self._sign(to_proto(card, a2a_pb2.AgentCard))
            signatures = [
                A2AAgentCardSignature(protected=s.protected, signature=s.signature)
                for s in signed.signatures
            ]
            self._signed[content] = signatures
            while len(self._signed) > _SIGNED_CARDS:
                self._signed.popitem(last=False)
        self._signed.move_to_end(content)
        return card.model_copy(update={"signatures": signatures})

    def sign_proto(self, card: a2a_pb2.AgentCard) -> a2a_pb2.AgentCard:
        """``card`` (the a2a-sdk's type) with its signature."""
        return card if self._sign is None else self._sign(card)

    def jwks(self) -> dict[str, list[dict[str, Any]]]:
        """The public keys that verify the cards: the signing key's, then the retired ones
        (none without a key)."""
        current = [] if self._key is None else [self._key.public_jwk]
        kids = {key["kid"] for key in current}
        return {"keys": current + [key for key in self._retired if key["kid"] not in kids]}
