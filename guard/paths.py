"""The ``subpath`` operator: a POSIX path that lies under a base directory, read lexically.

``{"subpath": "/srv/repo/src"}`` (plan version 2, docs/decisions/0066 section 2). The operand
is an absolute base already in normal form: one slash between segments, no ``.`` or ``..``
segment, no trailing slash (``/`` itself is a base), no character the value check below
refuses, at most 4,096 characters, and unchanged by NFKC (a base that NFKC changes could
never hold the NFKC reading of its own name). Validation names the normal form when there
is one: ``/srv/repo/`` is refused with ``write '/srv/repo'``.

A value satisfies it when it is a string that

* holds no C0 control (NUL included), DEL or backslash (``..\\`` traverses for a tool on
  Windows or one that turns backslashes into slashes), no ``%`` followed by two hex digits
  (a tool that percent-decodes reads ``%2e%2e/`` as ``../``) and no lone surrogate;
* is absolute (starts with ``/``);
* resolves lexically: split on ``/``, drop empty and ``.`` segments (every run of slashes,
  leading ones included, is one), pop on ``..``, and refuse the value when ``..`` would pop
  the root. ``posixpath.normpath`` is not used: it keeps exactly two leading slashes
  (``//srv``) and silently drops ``..`` above the root (``/../etc`` becomes ``/etc``);
* has no segment made of dots and spaces alone other than ``.`` and ``..`` (Windows trims
  trailing dots and spaces from a segment, so ``.. `` or ``...`` may read as ``..``; a check
  added to 0066's list, which only ever refuses more);
* reads the same way once NFKC-normalised (``unicodedata.normalize("NFKC", value)`` turns
  U+2025 TWO DOT LEADER and two U+FF0E FULLWIDTH FULL STOP into ``..``, U+FF0F FULLWIDTH
  SOLIDUS into ``/``, U+FF05 into ``%``, U+FF3C into a backslash): every check above holds
  for that reading too;
* and both readings lie under the base by whole segments (``/srv/repo/src-x`` is not under
  ``/srv/repo/src``; the base lies under itself). The comparison is exact: ``/SRV/repo`` is
  not under ``/srv/repo``.

The check is lexical. It cannot see the file system: a symbolic link (or a hard link, a bind
mount, a Windows junction or 8.3 short name) under the base can still lead out of it, and
only the tool, resolving the real path (``os.path.realpath``, ``openat2`` with
``RESOLVE_BENEATH``), can refuse that; likewise a link outside a denied base may lead
into it. A tool that transcodes names to a legacy code page (Windows "best fit") may read
yet other characters as separators.

Deny rules read it fail-closed (guard.deny, docs/decisions/0016): a value is *provably
outside* the base only when it passes every check above, both readings resolve, and both,
compared the way a case-insensitive file system might (full case folding with compatibility
normalisation, default-ignorable code points such as U+200C dropped, trailing dots and
spaces trimmed, a Windows ``:stream`` suffix cut), lie outside the base so folded. Anything
else matches the deny.

The relation between two operands is exact: a step's base under a rule's base is inside, a
rule's base strictly under the step's overlaps (the rule's base itself is a shared value,
the step's base is not admitted by the rule), and bases that part at some segment share no
value, since every admitted value starts with its base's segments in both readings. The
deny relation is the same over folded segments.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any, Final

from guard._document import is_valid_unicode, type_name
from guard.errors import FieldError

__all__ = [
    "MAX_BASE_LENGTH",
    "OPERATOR",
    "check_operand",
    "compile_excluder",
    "compile_matcher",
    "deny_relation",
    "relation",
    "samples",
]

OPERATOR: Final = "subpath"
#: characters in a base (Linux's PATH_MAX)
MAX_BASE_LENGTH: Final = 4_096
#: the name of the child `samples` adds under a base
SAMPLE_CHILD: Final = "sample.txt"

Segments = tuple[str, ...]

# A C0 control, DEL, a backslash, or a percent escape.
_FORBIDDEN: Final = re.compile(r"[\x00-\x1f\x7f\\]|%[0-9A-Fa-f]{2}")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_PERCENT_ESCAPE: Final = re.compile(r"%[0-9A-Fa-f]{2}")
_DOTS_AND_SPACES: Final = frozenset(". ")
# Default-ignorable code points outside category Cf (Unicode's DerivedCoreProperties): the
# combining grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian and other
# variation selectors. HFS+ ignores such characters when it compares names.
_IGNORABLE: Final = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)


def _text(value: Any) -> str | None:
    """`value` as a plain str holding valid Unicode and no forbidden character, else None.
    A str subclass is copied, so none of its methods runs."""
    if not isinstance(value, str):
        return None
    text = value if type(value) is str else "".join([value])
    if _FORBIDDEN.search(text) is not None or not is_valid_unicode(text):
        return None
    return text


def _resolve(text: str) -> Segments | None:
    """The segments of absolute `text` resolved lexically; None when it is relative, when
    ``..`` pops the root, or when a segment is made of dots and spaces alone."""
    if not text.startswith("/"):
        return None
    if "/." not in text and "//" not in text and "/ " not in text and text[-1] != "/":
        return tuple(text[1:].split("/"))  # no segment to drop, pop or refuse
    segments: list[str] = []
    for segment in text.split("/"):
        if segment == "" or segment == ".":
            continue
        if segment == "..":
            if not segments:
                return None
            segments.pop()
        elif _DOTS_AND_SPACES.issuperset(segment):
            return None
        else:
            segments.append(segment)
    return tuple(segments)


def _readings(value: Any) -> tuple[Segments, Segments] | None:
    """The raw and NFKC readings of `value`, resolved; None when either fails a check."""
    text = _text(value)
    if text is None:
        return None
    raw = _resolve(text)
    if raw is None:
        return None
    if text.isascii():  # NFKC leaves ASCII alone
        return raw, raw
    normalised = unicodedata.normalize("NFKC", text)
    if _FORBIDDEN.search(normalised) is not None:
        return None
    compatible = _resolve(normalised)
    if compatible is None:
        return None
    return raw, compatible


def _base_segments(base: str) -> Segments:
    return tuple(base.split("/")[1:]) if base != "/" else ()


def _fold(segment: str) -> str:
    """A segment as a case-insensitive file system might compare it: compatibility caseless
    matching (Unicode D146: NFKD(casefold(NFKD(casefold(NFD(x)))))) without default-ignorable
    code points (HFS+ ignores them: git's CVE-2014-9390), trailing dots and spaces trimmed
    and a ``:stream`` suffix cut (Windows)."""
    if segment.isascii():
        folded = segment.lower()
    else:
        folded = unicodedata.normalize("NFD", segment).casefold()
        folded = unicodedata.normalize("NFKD", folded).casefold()
        folded = "".join(
            character
            for character in unicodedata.normalize("NFKD", folded)
            if character not in _IGNORABLE and unicodedata.category(character) != "Cf"
        )
    return folded.partition(":")[0].rstrip(". ")


def _folded(segments: Segments) -> Segments:
    return tuple(_fold(segment) for segment in segments)


def _folded_under(segments: Segments, folded_base: Segments) -> bool:
    """Whether `segments`, folded, lie under `folded_base` (only its first segments fold)."""
    if len(segments) < len(folded_base):
        return False
    prefix = zip(segments[: len(folded_base)], folded_base, strict=True)
    return all(_fold(segment) == base for segment, base in prefix)


def _under(segments: Segments, base: Segments) -> bool:
    return segments[: len(base)] == base


# --- validation --------------------------------------------------------------------------


def check_operand(operand: object, path: str, errors: list[FieldError]) -> None:
    """Append a FieldError at `path` for every problem with a ``subpath`` base."""
    if not isinstance(operand, str):
        errors.append(
            FieldError(path, f"must be a string (an absolute path), not {type_name(operand)}")
        )
        return
    if not is_valid_unicode(operand):
        errors.append(FieldError(path, "must be valid Unicode (contains a lone surrogate)"))
        return
    if len(operand) > MAX_BASE_LENGTH:
        errors.append(FieldError(path, f"must be at most {MAX_BASE_LENGTH} characters"))
        return
    problems = _character_problems(operand)
    if problems:
        errors.extend(FieldError(path, problem) for problem in problems)
        return
    if not operand.startswith("/"):
        errors.append(FieldError(path, "must be an absolute path (start with '/')"))
        return
    if _resolve(operand) is None:
        errors.append(
            FieldError(
                path,
                "must not climb above the root with '..' nor hold a segment of dots and"
                " spaces alone",
            )
        )
        return
    normal = _normal_form(operand)
    if normal is None:
        reading = unicodedata.normalize("NFKC", operand)
        errors.append(
            FieldError(
                path,
                f"must be unchanged by NFKC, which reads it as {reading!r} (another path)",
            )
        )
    elif normal != operand:
        errors.append(
            FieldError(
                path,
                "must be in normal form (one slash between segments, no '.' or '..' segment,"
                f" no trailing slash, unchanged by NFKC): write {normal!r}",
            )
        )


def _character_problems(text: str) -> list[str]:
    problems = []
    if _CONTROL.search(text):
        problems.append("must not contain a control character (U+0000 to U+001F, U+007F)")
    if "\\" in text:
        problems.append("must not contain a backslash")
    if _PERCENT_ESCAPE.search(text):
        problems.append("must not contain a percent escape such as %2e")
    return problems


def _normal_form(base: str) -> str | None:
    """The normal form of a base that resolves: its segments, each NFKC-normalised; None
    when NFKC turns a segment into another path (a separator, a dot segment, a character
    the checks refuse), so that no spelling of the same directory is a valid base."""
    segments = _resolve(base)
    assert segments is not None
    normalised = tuple(unicodedata.normalize("NFKC", segment) for segment in segments)
    normal = "/" + "/".join(normalised)
    if _FORBIDDEN.search(normal) is not None or _resolve(normal) != normalised:
        return None
    return normal if unicodedata.normalize("NFKC", normal) == normal else None


# --- matching ----------------------------------------------------------------------------


def compile_matcher(operand: Any) -> Callable[[Any], bool]:
    """For a validated base: value -> True when both readings of the value lie under it."""
    base = _base_segments(operand)

    def match_subpath(value: Any) -> bool:
        try:
            readings = _readings(value)
        except Exception:  # never raise on a call argument
            return False
        if readings is None:
            return False
        raw, compatible = readings
        return _under(raw, base) and _under(compatible, base)

    return match_subpath


def compile_excluder(operand: Any) -> Callable[[Any], bool]:
    """For a validated base: value -> True only when the value is provably outside it (the
    deny reading: both readings resolve and, folded, lie outside the folded base)."""
    base = _folded(_base_segments(operand))

    def provably_outside(value: Any) -> bool:
        try:
            readings = _readings(value)
            if readings is None:
                return False
            raw, compatible = readings
            if _folded_under(raw, base):
                return False
            return compatible is raw or not _folded_under(compatible, base)
        except Exception:  # never raise on a call argument: not provably outside
            return False

    return provably_outside


# --- relation ----------------------------------------------------------------------------


def relation(step: Any, rule: Any) -> str:
    """The values a step with base `step` admits against those a rule with base `rule`
    admits: "inside", "overlapping" or "disjoint" (always decided)."""
    return _relation(_base_segments(step), _base_segments(rule))


def deny_relation(step: Any, rule: Any) -> str:
    """The values a step with base `step` admits against those a deny rule with base `rule`
    matches (does not exclude). Every admitted value's readings start with the step's
    segments, and folding works segment by segment, so comparing the folded bases decides:
    the step's under the deny's is inside; the deny's strictly under the step's overlaps
    (the step's base passes, the step's base followed by the deny's extra segments is
    matched); bases that part at some folded segment are disjoint."""
    return _relation(_folded(_base_segments(step)), _folded(_base_segments(rule)))


def _relation(step: Segments, rule: Segments) -> str:
    if _under(step, rule):
        return "inside"
    if _under(rule, step):
        return "overlapping"
    return "disjoint"


def samples(operand: Any) -> list[Any]:
    """The base itself and a child under it: both satisfy the operand."""
    child = f"{operand.rstrip('/')}/{SAMPLE_CHILD}"
    return [operand, child]
