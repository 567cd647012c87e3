"""What the card routes answer besides the cards (``disco_common.a2a`` holds those)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CardKeys"]


class CardKeys(BaseModel):
    """A JSON Web Key Set (RFC 7517): the public keys that verify the cards' signatures."""

    model_config = ConfigDict(extra="forbid")

    keys: list[dict[str, str]] = Field(
        description="One JWK per key (`kty`, `kid`, `alg`, `use` and the key's own members)."
    )
