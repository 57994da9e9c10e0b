"""RFC 8785 canonical JSON and the hashes built on it (plan hash, policy hash).

`rfc8785` refuses integers beyond +/-(2**53 - 1), non-finite floats and strings that are
not valid Unicode (lone surrogates); plan and policy validation rejects those values with
their path, so hashing a validated document never raises.
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

import rfc8785

from guard._document import MAX_SAFE_INTEGER

__all__ = ["canonical_json", "sha256_hex"]

_MAX_PLAIN_DEPTH: Final = 32


def _plain(value: object, depth: int = 0) -> bool:
    """True when `value` is JSON whose RFC 8785 form is exactly what `json.dumps` writes
    with sorted keys: objects whose keys are strings below U+D800 (there, code-point order
    is UTF-16 order), arrays, strings without lone surrogates, safe integers, booleans and
    null. Floats are not plain: RFC 8785 writes numbers the ECMAScript way."""
    # The type is read once into `kind` on this hot path; mypy does not narrow `value`
    # through it, hence the ignores below.
    kind = type(value)
    if kind is str:
        return value.isascii() or _encodable(value)  # type: ignore[attr-defined, arg-type]
    if kind is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER  # type: ignore[operator]
    if value is None or kind is bool:
        return True
    if depth >= _MAX_PLAIN_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or not (key.isascii() or max(key) < "\ud800"):
                return False
            if not _plain(item, depth + 1):
                return False
        return True
    if kind is list:
        return all(_plain(item, depth + 1) for item in value)  # type: ignore[attr-defined]
    return False


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, which RFC 8785 refuses
        return False
    return True


def canonical_json(value: object) -> bytes:
    """Serialise a JSON value as RFC 8785 (JCS) canonical UTF-8 bytes.

    The common shapes (string keys, strings, safe integers, no floats) are written by the C
    JSON encoder, which produces the same bytes several times faster; anything else goes
    through `rfc8785`, whose errors propagate. A property test checks both paths agree.
    """
    if _plain(value):
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        return text.encode("utf-8")
    # Any value may come in here: rfc8785 raises on what is not JSON.
    return rfc8785.dumps(value)  # type: ignore[arg-type]


def sha256_hex(value: object) -> str:
    """Lowercase hex SHA-256 of the canonical JSON of `value`."""
    return hashlib.sha256(canonical_json(value)).hexdigest()
