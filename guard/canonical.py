"""RFC 8785 canonical JSON and the hashes built on it (plan hash, policy hash).

`rfc8785` refuses integers beyond +/-(2**53 - 1), non-finite floats and strings that are
not valid Unicode (lone surrogates); plan and policy validation rejects those values with
their path, so hashing a validated document never raises.
"""

from __future__ import annotations

import hashlib

import rfc8785

__all__ = ["canonical_json", "sha256_hex"]


def canonical_json(value: object) -> bytes:
    """Serialise a JSON value as RFC 8785 (JCS) canonical UTF-8 bytes."""
    return rfc8785.dumps(value)


def sha256_hex(value: object) -> str:
    """Lowercase hex SHA-256 of the canonical JSON of `value`."""
    return hashlib.sha256(canonical_json(value)).hexdigest()
