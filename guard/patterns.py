"""Glob and RE2 patterns: translating a glob to RE2 (cached), and compiling either into a
matcher that never raises.

The constraint operators ``glob`` and ``regex`` (guard.constraints) and a policy rule's tool
globs (guard.policy) all compile here, so a pattern means the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, Final, Literal

import re2

__all__ = [
    "ANCHOR_BOTH",
    "GLOB_ANY",
    "GLOB_STAR",
    "GlobClass",
    "GlobLiteral",
    "GlobPart",
    "GlobSyntaxError",
    "Matcher",
    "compile_glob",
    "compile_re2",
    "equals_string",
    "glob_parse",
    "glob_to_re2",
    "re2_full_matcher",
    "re2_native_match",
]

Matcher = Callable[[Any], bool]

_GLOB_METACHARACTERS: Final = frozenset("*?[")


class GlobSyntaxError(ValueError):
    """A glob pattern that cannot be translated (an unterminated or reversed class)."""


# --- RE2 ---------------------------------------------------------------------------------

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # errors are reported as FieldErrors, not on stderr
_RE2_OPTIONS.never_capture = True  # only "did it match" matters; capturing costs time

# The public re2 wrapper maps byte offsets back to str offsets and builds a Match object on
# every call (~6 us). Calling the underlying RE2 object with ANCHOR_BOTH and UTF-8 bytes
# gives the same answer in well under 1 us, which is what keeps a call decision within a few
# microseconds. Both are internals of google-re2, so fall back to the public API when absent.
_re2_binding = getattr(re2, "_re2", None)
_re2_anchor = getattr(getattr(_re2_binding, "RE2", None), "Anchor", None)
ANCHOR_BOTH: Final = getattr(_re2_anchor, "ANCHOR_BOTH", None)
_ANCHOR_BOTH: Final = ANCHOR_BOTH


def compile_re2(pattern: str) -> Any:
    """Compile with the module's options; raises ValueError with RE2's message."""
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as error:
        message = error.args[0] if error.args else "invalid pattern"
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        raise ValueError(str(message)) from None


def re2_native_match(pattern: str) -> Callable[[Any, bytes, int, int], Any] | None:
    """The RE2 object's own ``Match(anchor, data, start, end)`` for `pattern` (compiled
    with the module's options), or None when google-re2 does not expose it. A whole-string
    match is ``Match(ANCHOR_BOTH, data, 0, len(data))[0][0] >= 0`` on UTF-8 bytes, as
    `re2_full_matcher` does."""
    regexp = getattr(compile_re2(pattern), "_regexp", None)
    native_match = getattr(regexp, "Match", None)
    return native_match if native_match is not None and _ANCHOR_BOTH is not None else None


def re2_full_matcher(pattern: str) -> Matcher:
    native_match = re2_native_match(pattern)

    if native_match is not None:
        anchor = _ANCHOR_BOTH

        def match_native(value: Any) -> bool:
            if not isinstance(value, str):
                return False
            try:
                data = value.encode("utf-8")
            except UnicodeEncodeError:
                return False
            start: int = native_match(anchor, data, 0, len(data))[0][0]
            return start >= 0

        return match_native

    fullmatch = compile_re2(pattern).fullmatch

    def match_public(value: Any) -> bool:
        if not isinstance(value, str):
            return False
        try:
            return fullmatch(value) is not None
        except UnicodeEncodeError:
            return False

    return match_public


# --- glob --------------------------------------------------------------------------------


def _re2_literal(character: str) -> str:
    if character.isascii() and character.isalnum():
        return character
    return f"\\x{{{ord(character):x}}}"


@dataclass(frozen=True)
class GlobClass:
    """A ``[...]`` of a glob: its members as inclusive ``(first, last)`` character ranges
    (a single character is ``(c, c)``), negated by a leading ``!``."""

    negate: bool
    ranges: tuple[tuple[str, str], ...]


#: ``*`` (any run, newlines included) and ``?`` (one character) in a parsed glob.
GLOB_STAR: Final = "*"
GLOB_ANY: Final = "?"


@dataclass(frozen=True)
class GlobLiteral:
    """One character a glob matches as itself."""

    character: str


GlobPart = Literal["*", "?"] | GlobClass | GlobLiteral


def _glob_class(body: str, negate: bool, start: int) -> GlobClass:
    ranges: list[tuple[str, str]] = []
    position = 0
    while position < len(body):
        first = body[position]
        if position + 2 < len(body) and body[position + 1] == "-":
            last = body[position + 2]
            if ord(last) < ord(first):
                raise GlobSyntaxError(
                    f"character class at position {start} has a reversed range {first}-{last}"
                )
            ranges.append((first, last))
            position += 3
        else:
            ranges.append((first, first))
            position += 1
    return GlobClass(negate=negate, ranges=tuple(ranges))


@lru_cache(maxsize=1024)
def glob_parse(pattern: str) -> tuple[GlobPart, ...]:
    """The glob grammar, in one place: a run of ``*`` is one `GLOB_STAR`, ``?`` is
    `GLOB_ANY`, ``[...]`` / ``[!...]`` a `GlobClass` (a ``]`` right after ``[`` or ``[!``
    is a member), anything else a `GlobLiteral`. `glob_to_re2` and the relation between
    constraints (guard.relation) both read a glob through it.

    Raises GlobSyntaxError for an unterminated ``[`` or a reversed range like ``[z-a]``.
    """
    parts: list[GlobPart] = []
    position = 0
    length = len(pattern)
    while position < length:
        character = pattern[position]
        if character == "*":
            while position + 1 < length and pattern[position + 1] == "*":
                position += 1
            parts.append(GLOB_STAR)
        elif character == "?":
            parts.append(GLOB_ANY)
        elif character == "[":
            cursor = position + 1
            negate = cursor < length and pattern[cursor] == "!"
            if negate:
                cursor += 1
            body_start = cursor
            if cursor < length and pattern[cursor] == "]":
                cursor += 1  # a `]` right after `[` or `[!` is a member, not the end
            while cursor < length and pattern[cursor] != "]":
                cursor += 1
            if cursor >= length:
                raise GlobSyntaxError(
                    f"unterminated character class starting at position {position}"
                )
            parts.append(_glob_class(pattern[body_start:cursor], negate, position))
            position = cursor
        else:
            parts.append(GlobLiteral(character))
        position += 1
    return tuple(parts)


def _part_to_re2(part: GlobPart) -> str:
    if part == GLOB_STAR:
        return ".*"
    if part == GLOB_ANY:
        return "."
    if isinstance(part, GlobClass):
        items = "".join(
            _re2_literal(first) if first == last else f"{_re2_literal(first)}-{_re2_literal(last)}"
            for first, last in part.ranges
        )
        return "[" + ("^" if part.negate else "") + items + "]"
    assert isinstance(part, GlobLiteral)
    return _re2_literal(part.character)


@lru_cache(maxsize=1024)
def glob_to_re2(pattern: str) -> str:
    """Translate a glob into an RE2 pattern for a whole-string match.

    Cached: a plan or policy repeats its patterns, and validation and compilation both
    translate them (a refused pattern raises each time; errors are not cached).

    Raises GlobSyntaxError for an unterminated ``[`` or a reversed range like ``[z-a]``.
    """
    # `*` and `?` also match newlines
    return "(?s)" + "".join(_part_to_re2(part) for part in glob_parse(pattern))


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def compile_glob(pattern: str) -> Matcher:
    """Compile a glob into a matcher; common shapes avoid the regex engine altogether."""
    stars = pattern.count("*")
    literal = pattern.replace("*", "")
    if _GLOB_METACHARACTERS.isdisjoint(literal):
        if stars == 0:
            return partial(equals_string, pattern)
        if not literal:
            return _is_str
        stripped = pattern.strip("*")
        if "*" not in stripped:
            starts, ends = pattern.startswith("*"), pattern.endswith("*")
            if starts and ends:
                return partial(_contains_string, stripped)
            if ends:
                return partial(_starts_with, stripped)
            if starts:
                return partial(_ends_with, stripped)
    return re2_full_matcher(glob_to_re2(pattern))


def equals_string(expected: str, value: Any) -> bool:
    return isinstance(value, str) and value == expected


def _starts_with(prefix: str, value: Any) -> bool:
    return isinstance(value, str) and value.startswith(prefix)


def _ends_with(suffix: str, value: Any) -> bool:
    return isinstance(value, str) and value.endswith(suffix)


def _contains_string(part: str, value: Any) -> bool:
    return isinstance(value, str) and part in value
