"""Publishing: the public keys a verifier may need, as a JWK Set. Reads only."""

from __future__ import annotations

from datetime import datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.db.models import Q, QuerySet
from django.utils import timezone

from guard.jwk import b64url_decode, public_jwk

from ..models import SigningKey
from .lifecycle import max_token_lifetime
from .signer import signing_alg

State = SigningKey.State


def published_keys(now: datetime | None = None) -> QuerySet[SigningKey]:
    """Keys a verifier may need: next, active, and retired ones whose tokens may still live."""
    now = now or timezone.now()
    return SigningKey.objects.filter(
        Q(state__in=[State.NEXT, State.ACTIVE])
        | Q(state=State.RETIRED, retired_at__gt=now - max_token_lifetime())
    ).order_by("created_at")


def signing_key_public(key: SigningKey) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(
        b64url_decode(key.public_key, "the stored public key")
    )


def jwks_document(now: datetime | None = None) -> dict:
    """The JWK Set of the published keys. A read: on a database with no key yet it is
    empty; the first keys come from the first signature or rotation."""
    keys = []
    alg = signing_alg()  # the name tokens are signed under; verifiers accept both
    for key in published_keys(now):
        jwk = public_jwk(signing_key_public(key))
        keys.append({**jwk, "kid": key.kid, "alg": alg, "use": "sig"})
    return {"keys": keys}
