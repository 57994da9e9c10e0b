"""Exceptions shared by the plan, policy and token code."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "DocumentInvalid",
    "FieldError",
    "TokenInvalid",
    "WrongIssuer",
    "index_path",
    "key_path",
]

# Keeps str(DocumentInvalid) readable when garbage produces thousands of errors; the full
# list is always on `.errors`.
_MAX_ERRORS_IN_MESSAGE = 20

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def key_path(parent: str, key: object) -> str:
    """The path of `key` inside the object at `parent`, as a FieldError's `path` writes it:
    ``steps[0].args.repo``, or ``args["a.b"]`` for a name that is not a plain identifier."""
    if isinstance(key, str) and _PLAIN_NAME.fullmatch(key):
        return f"{parent}.{key}" if parent else key
    # json.dumps escapes quotes, control characters and lone surrogates.
    text = json.dumps(key) if isinstance(key, str) else repr(key)
    return f"{parent}[{text}]"


def index_path(parent: str, index: int) -> str:
    """The path of item `index` of the array at `parent` (``steps[3]``)."""
    return f"{parent}[{index}]"


@dataclass(frozen=True)
class FieldError:
    """One problem in a validated document.

    `path` is relative to the validated document, e.g. ``steps[3].args.repo.regx``, ``goal``
    or ``rules[0].tools[1]``; the empty string means the document itself. Names that are
    not plain identifiers are written in brackets as JSON strings: ``args["a.b"].eq``.
    """

    path: str
    detail: str

    def prefixed(self, prefix: str) -> FieldError:
        """Return this error as seen from a document that holds this one at `prefix`."""
        if not self.path:
            path = prefix
        elif self.path.startswith("["):
            path = prefix + self.path
        else:
            path = f"{prefix}.{self.path}" if prefix else self.path
        return FieldError(path=path, detail=self.detail)

    def __str__(self) -> str:
        return f"{self.path or '(document)'}: {self.detail}"


class DocumentInvalid(ValueError):
    """A plan or policy document failed validation; `.errors` lists every problem found."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: list[FieldError] = list(errors)
        super().__init__(self.errors)

    def __str__(self) -> str:
        shown = "; ".join(str(error) for error in self.errors[:_MAX_ERRORS_IN_MESSAGE])
        hidden = len(self.errors) - _MAX_ERRORS_IN_MESSAGE
        if hidden > 0:
            shown += f"; and {hidden} more"
        count = len(self.errors)
        return f"invalid document ({count} error{'s' if count != 1 else ''}): {shown}"


class TokenInvalid(Exception):
    """An intent token failed verification; `.reason` says why, for humans and logs."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)

    def __str__(self) -> str:
        return self.reason


class WrongIssuer(TokenInvalid):
    """The token names another issuer (``iss``) than the one required: `expected` is the
    issuer the verifier was given, `presented` the token's (None when it has none). The
    reason names both: the usual cause is a URL spelt two ways (``localhost`` and
    ``127.0.0.1``, another port) for one control plane."""

    def __init__(self, *, expected: str, presented: object) -> None:
        self.expected = expected
        self.presented = presented if isinstance(presented, str) else None
        named = _quoted(presented) if presented is not None else "no issuer"
        super().__init__(f"wrong issuer: the token names {named}, expected {_quoted(expected)}")


def _quoted(value: object) -> str:
    """A claim's value in a message: JSON, cut to a readable length."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 200 else text[:197] + "..."
