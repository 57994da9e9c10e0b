"""Bearer credentials shown once and stored hashed: agents' API keys (``pg_``) and audit
tokens (``pga_``) are both ``<prefix><lookup id>_<secret>``.

The lookup id (lowercase hex) finds the row; only a keyed hash of the secret is stored,
keyed by a pepper derived from SECRET_KEY and the credential's purpose, so a database dump
alone cannot be used to test guesses offline, and a hash of one kind never verifies as
another. Comparison is constant-time (``hmac.compare_digest``). Hashing is explicit, in the
services that create and authenticate, never on save.

Kernel module: imports no Plangate app.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

logger = logging.getLogger(__name__)

_HEX_DIGITS = "0123456789abcdef"


@dataclass(frozen=True)
class MintedCredential:
    lookup_id: str
    secret_hash: str
    plaintext: str  # shown once, never stored or logged


@dataclass(frozen=True)
class CredentialFormat:
    prefix: str  # "pg_"
    purpose: bytes  # b"plangate.api-key.v1": the pepper's label
    lookup_id_length: int = 12

    def visible_prefix(self, lookup_id: str) -> str:
        """The non-secret start of a credential, enough to recognise it in a list."""
        return f"{self.prefix}{lookup_id}"

    def secret_hash(self, secret: str) -> str:
        pepper = hmac.new(settings.SECRET_KEY.encode(), self.purpose, hashlib.sha256).digest()
        return hmac.new(pepper, secret.encode(), hashlib.sha256).hexdigest()

    def mint(self) -> MintedCredential:
        lookup_id = secrets.token_hex(self.lookup_id_length // 2)
        secret = secrets.token_urlsafe(32)
        return MintedCredential(
            lookup_id=lookup_id,
            secret_hash=self.secret_hash(secret),
            plaintext=f"{self.visible_prefix(lookup_id)}_{secret}",
        )

    def adopt(self, plaintext: str) -> MintedCredential | None:
        """The stored form of a well-formed credential someone already holds (the demo key
        `make run` keeps in var/local.env, made again on a fresh database), else None."""
        parsed = self.parse(plaintext)
        if parsed is None:
            return None
        lookup_id, secret = parsed
        return MintedCredential(
            lookup_id=lookup_id, secret_hash=self.secret_hash(secret), plaintext=plaintext
        )

    def parse(self, plaintext: str) -> tuple[str, str] | None:
        """(lookup id, secret) of a well-formed credential of this kind, else None.

        Only lowercase hex ever names a credential; other text (NUL included, which
        PostgreSQL cannot even compare) is refused before any query.
        """
        if not plaintext.startswith(self.prefix):
            return None
        lookup_id, _, secret = plaintext[len(self.prefix) :].partition("_")
        if len(lookup_id) != self.lookup_id_length or not secret or lookup_id.strip(_HEX_DIGITS):
            return None
        return lookup_id, secret

    def matches(self, secret_hash: str, secret: str) -> bool:
        return hmac.compare_digest(secret_hash, self.secret_hash(secret))


def credential_touch(credential: Any, *, now: datetime | None = None) -> None:
    """Record a credential's use (its ``last_used_at``) at most once per
    PLANGATE_API_KEY_TOUCH_INTERVAL: one conditional UPDATE, not a write per request (a SIEM
    or a CI job polls every few seconds). ``credential`` is a model instance with
    ``last_used_at``: an API key, an audit token, an admin token.

    Bookkeeping after the request's own work: a database error here is logged, not raised,
    or an agent would get an error for a plan that was stored and declare it twice."""
    now = now or timezone.now()
    interval = timedelta(seconds=settings.PLANGATE_API_KEY_TOUCH_INTERVAL)
    if credential.last_used_at is not None and now - credential.last_used_at < interval:
        return
    try:
        type(credential)._default_manager.filter(pk=credential.pk).exclude(
            last_used_at__gt=now - interval
        ).update(last_used_at=now)
    except DatabaseError as exc:
        logger.warning("could not record the last use of %s: %s", credential, exc)
        return
    credential.last_used_at = now


def credential_lookup(queryset: Any, credential_format: CredentialFormat, plaintext: str) -> Any:
    """The row of ``queryset`` (usable credentials of one kind) that ``plaintext`` names and
    whose secret it holds, or None: a malformed credential reaches no query, and the secret
    is compared in constant time."""
    parsed = credential_format.parse(plaintext)
    if parsed is None:
        return None
    lookup_id, secret = parsed
    row = queryset.filter(lookup_id=lookup_id).first()
    if row is None or not credential_format.matches(row.secret_hash, secret):
        return None
    return row
