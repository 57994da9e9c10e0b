"""Signing-key services, one module per concern (see docs/keys.md):

* ``encryption``: private keys encrypted at rest under ``KEY_ENCRYPTION_KEY``, the start-up
  probe, re-encryption, and the per-process cache of decrypted keys;
* ``lifecycle``: the first keys, rotation, revocation, deleting keys no token needs, all
  under the lock of ``locking``, each returning what it changed (``results``);
* ``signer``: the key that signs now, and the read-only readiness probe;
* ``publishing``: the JWK Set, read-only.

A key that cannot be decrypted is never replaced silently: signing then fails with
``no_signing_key``, and no rotation creates a key until the configured encryption key
decrypts the keys that sign. Import from ``plans.keys``; the modules are its layout.
"""

from .encryption import (
    EncryptionKeyError,
    clear_private_key_cache,
    encryption_key_problem,
    encryption_keys,
    require_usable_encryption_key,
    signing_keys_reencrypt,
)
from .lifecycle import (
    RotationSchedule,
    max_token_lifetime,
    next_key_signs_from,
    publication_delay,
    rotation_due_at,
    rotation_period,
    rotation_schedule,
    signing_key_create,
    signing_key_revoke,
    signing_key_rotate,
    signing_key_rotation_failed,
    signing_keys_bootstrap,
)
from .publishing import jwks_document, published_keys, signing_key_public
from .results import KeyChange, RevocationResult, RotationResult
from .signer import Signer, active_signer, signing_alg, signing_readiness

__all__ = [
    "EncryptionKeyError",
    "KeyChange",
    "RevocationResult",
    "RotationResult",
    "RotationSchedule",
    "Signer",
    "active_signer",
    "clear_private_key_cache",
    "encryption_key_problem",
    "encryption_keys",
    "jwks_document",
    "max_token_lifetime",
    "next_key_signs_from",
    "publication_delay",
    "published_keys",
    "require_usable_encryption_key",
    "rotation_due_at",
    "rotation_period",
    "rotation_schedule",
    "signing_alg",
    "signing_key_create",
    "signing_key_public",
    "signing_key_revoke",
    "signing_key_rotate",
    "signing_key_rotation_failed",
    "signing_keys_bootstrap",
    "signing_keys_reencrypt",
    "signing_readiness",
]
