"""The key that signs: the signing path of issuance and refresh, and its readiness probe."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from guard.tokens import ed25519_jws
from kernel.problems import Code, DomainError

from ..models import SigningKey
from .encryption import EncryptionKeyError, private_key_decrypt, require_authentic
from .lifecycle import signing_keys_bootstrap

logger = logging.getLogger(__name__)

State = SigningKey.State

NO_ACTIVE_KEY = "No signing key is active; try again shortly."
UNUSABLE_KEY = "The signing key cannot be used; the operator has been told."


@dataclass(frozen=True)
class Signer:
    kid: str
    private_key: Ed25519PrivateKey

    def sign(self, claims: dict, *, typ: str = "JWT") -> str:
        """``claims`` as a compact JWS with this key, under the name PLANGATE_SIGNING_ALG
        gives Ed25519 (`EdDSA` or RFC 9864's `Ed25519`: docs/decisions/0067)."""
        payload = json.dumps(claims, separators=(",", ":")).encode()
        return ed25519_jws().encode(
            payload,
            self.private_key,
            algorithm=signing_alg(),
            headers={"kid": self.kid, "typ": typ},
        )


def signing_alg() -> str:
    """The JWS ``alg`` the server signs under now: the setting, read at each call."""
    return str(settings.PLANGATE_SIGNING_ALG)


def active_signer(active_key: SigningKey | None = None) -> Signer:
    """The key that signs now, or DomainError ``no_signing_key``.

    The active key is read from the database on every call (or given as ``active_key``, the
    row the caller read in this same request: plans.selectors.signing_context_read): a
    rotation or revocation by any process takes effect at the next signature. Only the
    decryption is kept per process (plans.keys.encryption), keyed by the kid and the
    ciphertext it was made from. This is the signing path, a write: on a database with no
    key at all it creates the first keys, so the first plan issued on a fresh database is
    signed.
    """
    key = (
        active_key
        if active_key is not None
        else SigningKey.objects.filter(state=State.ACTIVE).first()
    )
    if key is None:
        try:
            signing_keys_bootstrap()
            # Read again whether this process created the keys or lost the race to another
            # that did (its insert waited for the winner's commit): either way one is active.
            key = SigningKey.objects.filter(state=State.ACTIVE).first()
        except EncryptionKeyError as exc:
            logger.error("refusing to sign: no signing key exists and %s", exc)
    if key is None:
        logger.error("no active signing key: refusing to sign")
        raise DomainError(Code.NO_SIGNING_KEY, NO_ACTIVE_KEY)
    try:
        return Signer(kid=key.kid, private_key=private_key_decrypt(key))
    except EncryptionKeyError as exc:
        logger.error("refusing to sign: %s", exc)
        raise DomainError(Code.NO_SIGNING_KEY, UNUSABLE_KEY) from exc


def signing_readiness() -> str:
    """The kid that would sign now, or DomainError ``no_signing_key``. For ``/readyz``.

    A read: it neither creates a key on an empty database nor decrypts the active one; it
    checks that the active key's stored private half was made under KEY_ENCRYPTION_KEY.
    """
    row = (
        SigningKey.objects.filter(state=State.ACTIVE)
        .values_list("kid", "private_key_encrypted")
        .first()
    )
    if row is None:
        logger.warning("readiness: no active signing key")
        raise DomainError(Code.NO_SIGNING_KEY, NO_ACTIVE_KEY)
    kid, encrypted = row
    try:
        require_authentic(SigningKey(kid=kid, state=State.ACTIVE, private_key_encrypted=encrypted))
    except EncryptionKeyError as exc:
        logger.error("readiness: %s", exc)
        raise DomainError(Code.NO_SIGNING_KEY, UNUSABLE_KEY) from exc
    return kid
