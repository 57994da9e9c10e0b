"""What a webhook request's signature covers, in one place (docs/decisions/0037).

The signed string is ``<timestamp>.<body>``: the decimal Unix time of the attempt (the
``X-Plangate-Timestamp`` header), a full stop, then the raw request body, byte for byte.
``X-Plangate-Signature`` is ``sha256=`` followed by the lowercase hex HMAC-SHA256 of that
string under the team's webhook secret. The timestamp is inside the signature so a
receiver that rejects old timestamps (say, over five minutes) also rejects replays.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Plangate-Signature"
TIMESTAMP_HEADER = "X-Plangate-Timestamp"
EVENT_HEADER = "X-Plangate-Event"
DELIVERY_HEADER = "X-Plangate-Delivery"
SIGNATURE_PREFIX = "sha256="


def signed_string(timestamp: int, body: bytes) -> bytes:
    return str(timestamp).encode("ascii") + b"." + body


def webhook_signature(*, secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-Plangate-Signature`` value for ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret.encode(), signed_string(timestamp, body), hashlib.sha256)
    return SIGNATURE_PREFIX + digest.hexdigest()


def webhook_signature_valid(*, secret: str, timestamp: str, body: bytes, signature: str) -> bool:
    """What a receiver checks (and our tests do): the header matches, compared in
    constant time. The timestamp's age is the receiver's own policy."""
    if not timestamp.isdigit():
        return False
    expected = webhook_signature(secret=secret, timestamp=int(timestamp), body=body)
    return hmac.compare_digest(expected, signature)
