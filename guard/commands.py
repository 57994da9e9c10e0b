"""The ``argv`` operator: a command line naming one of a list of programs.

Operand: ``{"cmd": [...], "maxArgs"?: n, "options"?: [...]}``. ``cmd`` holds 1 to 100
program names (`MAX_PROGRAMS`), compared exactly: ``/usr/bin/git`` is another name than
``git``. ``maxArgs`` (0 to 1,000) bounds the elements after the program; absent, any
number. ``options`` (at most 1,000) lists the options a call may pass: with it, every
element starting with ``-`` must be one of them, or one of them followed by ``=`` and a
value (``--format`` admits ``--format=short``); an option is therefore written without
``=``. Names and options have no whitespace, quote or shell metacharacter, and no NUL.

A value satisfies the operand when it is a non-empty list of strings, or a string that
``shlex.split(posix=True)`` splits (an unclosed quote refuses), and:

* the raw string holds none of ``; & | ` $ ( ) < > { } * ? [ ] ~ ! # \\``, no control
  character (newline, carriage return, tab, NUL, ...) and no lone surrogate. This is checked
  **before** splitting: shlex turns ``git\\nrm`` into ``["git", "rm"]``, losing the newline a
  shell would run as a second command. Quotes ``'`` ``"`` are allowed there (shlex's syntax);
* every element holds none of those, no quote and no whitespace;
* element 0 equals one of ``cmd`` (``FOO=1 git`` names the program ``FOO=1``), at most
  ``maxArgs`` elements follow, and ``options`` (when given) admits each option element.

Limits, said in the docs: ``argv`` cannot know which options of a program are dangerous.
``git --upload-pack=/tmp/x status`` holds no metacharacter, and no rule that ignores the
program tells it from an honest option: ``options`` is the answer, and without it any
option passes. An element ``-u/tmp/x`` (an option with its value attached) must itself be
listed; a listed option admits any value given as the next element (``-c`` admits
``-c core.sshCommand=/tmp/x``), and a program that reads abbreviations (git reads
``--upl`` as ``--upload-pack``) reads a listed abbreviation as the option it stands for: list
options whole, and only those harmless with any value. The characters refused are those a
POSIX shell reads; ``%`` and ``^`` (``cmd.exe``) are admitted, so a tool must not hand the
value to ``cmd.exe``.

A deny rule (docs/decisions/0016) passes over a value only when it is free of
metacharacters as above and its element 0 names none of ``cmd`` -- compared by base name,
case-folded and NFKC-normalised, without a Windows ``.exe`` ``.com`` ``.bat`` ``.cmd``
suffix, so ``/usr/bin/RM.exe`` names ``rm``; an element 0 holding ``=`` (a shell
assignment) or empty never passes -- or when it has more than ``maxArgs`` arguments. A
deny rule cannot see through a program that runs another (``env rm``, ``sudo rm``,
``xargs rm``): allow lists are the answer there.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any, Final

from guard._document import check_integer, check_unknown_keys, index_path, key_path, type_name
from guard.errors import FieldError

__all__ = [
    "MAX_ARGUMENTS",
    "MAX_ELEMENT_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_OPTIONS",
    "MAX_PROGRAMS",
    "OPERATOR",
    "check_operand",
    "compile_excluder",
    "compile_matcher",
    "deny_relation",
    "program_key",
    "relation",
    "samples",
    "split",
]

OPERATOR: Final = "argv"
MAX_PROGRAMS: Final = 100
MAX_OPTIONS: Final = 1_000
MAX_ARGUMENTS: Final = 1_000
MAX_NAME_LENGTH: Final = 200
# Linux refuses a single argument longer than this (MAX_ARG_STRLEN, 32 pages); the raw
# string is held to it too, which also bounds shlex's character-by-character work.
MAX_ELEMENT_LENGTH: Final = 131_072

_KEYS: Final = ("cmd", "maxArgs", "options")
_METACHARACTERS: Final = ";&|`$()<>{}*?[]~!#\\"
# Control characters (C0, DEL, C1: newline, carriage return, tab and NUL among them) and lone
# surrogates, besides the metacharacters.
_CONTROLS: Final = "\x00-\x1f\x7f-\x9f\ud800-\udfff"
_FORBIDDEN_IN_RAW: Final = re.compile(f"[{re.escape(_METACHARACTERS)}{_CONTROLS}]")
# In an element also quotes and any whitespace (`\s` is str.isspace's set).
_FORBIDDEN_IN_ELEMENT: Final = re.compile(f"[{re.escape(_METACHARACTERS)}'\"{_CONTROLS}]|\\s")
_WINDOWS_SUFFIXES: Final = (".exe", ".com", ".bat", ".cmd")
# Shell assignment words (`FOO=1 git`): a value whose element 0 holds `=` is never provably
# another program.
_ASSIGNMENT: Final = "="


# --- validation ---------------------------------------------------------------------------


def _element_problem(text: str) -> str | None:
    if len(text) > MAX_NAME_LENGTH:
        return f"must be at most {MAX_NAME_LENGTH} characters"
    if _FORBIDDEN_IN_ELEMENT.search(text):
        return "must not hold whitespace, quotes, control characters or any of " + " ".join(
            _METACHARACTERS
        )
    return None


def _check_names(
    value: object, path: str, errors: list[FieldError], *, minimum: int, maximum: int, what: str
) -> None:
    if not isinstance(value, list):
        errors.append(FieldError(path, f"must be an array of {what}, not {type_name(value)}"))
        return
    if len(value) < minimum:
        errors.append(FieldError(path, f"must hold at least {minimum} {what}"))
        return
    if len(value) > maximum:
        errors.append(FieldError(path, f"must hold at most {maximum} {what}"))
        return
    for index, item in enumerate(value):
        item_path = index_path(path, index)
        problem = _name_problem(item) if what == "programs" else _option_problem(item)
        if problem is not None:
            errors.append(FieldError(item_path, problem))


def _name_problem(item: object) -> str | None:
    if not isinstance(item, str):
        return f"must be a string, not {type_name(item)}"
    if not item:
        return "must not be empty"
    if item.startswith("-"):
        return "must not start with '-' (a program name, not an option)"
    if _ASSIGNMENT in item:
        return "must not hold '=' (a shell reads NAME=value as an assignment)"
    if item.endswith("/"):
        return "must not end with '/' (a program, not a directory)"
    return _element_problem(item)


def _option_problem(item: object) -> str | None:
    if not isinstance(item, str):
        return f"must be a string, not {type_name(item)}"
    if not item.startswith("-"):
        return "must start with '-'"
    if "=" in item:
        name = item.partition("=")[0]
        return f"must not hold '=': write {name!r}, which admits {name}=<value>"
    return _element_problem(item)


def check_operand(operand: object, path: str, errors: list[FieldError]) -> None:
    """Append a FieldError for every problem with an ``argv`` operand (paths below `path`:
    ``path.cmd[0]``, ``path.maxArgs``, ``path.options[2]``)."""
    if not isinstance(operand, Mapping):
        errors.append(FieldError(path, f"must be an object with 'cmd', not {type_name(operand)}"))
        return
    check_unknown_keys(operand, _KEYS, path, errors)
    if "cmd" not in operand:
        errors.append(FieldError(key_path(path, "cmd"), "is required"))
    else:
        _check_names(
            operand["cmd"],
            key_path(path, "cmd"),
            errors,
            minimum=1,
            maximum=MAX_PROGRAMS,
            what="programs",
        )
    if "maxArgs" in operand:
        check_integer(
            operand["maxArgs"], key_path(path, "maxArgs"), errors, minimum=0, maximum=MAX_ARGUMENTS
        )
    if "options" in operand:
        _check_names(
            operand["options"],
            key_path(path, "options"),
            errors,
            minimum=0,
            maximum=MAX_OPTIONS,
            what="options",
        )


# --- reading values -----------------------------------------------------------------------


def split(value: Any) -> list[str] | None:
    """The elements of a command value, or None when it is not one free of metacharacters:
    a non-empty list of strings, or a string shlex splits (checked before and after)."""
    if isinstance(value, str):
        if len(value) > MAX_ELEMENT_LENGTH or _FORBIDDEN_IN_RAW.search(value):
            return None
        if "'" in value or '"' in value:
            try:
                elements = shlex.split(value, posix=True)
            except ValueError:  # an unclosed quote
                return None
        else:
            # What shlex returns for a value without quotes or backslashes, whose only
            # whitespace shlex splits on is the space (tab, newline, CR are refused above).
            elements = [part for part in value.split(" ") if part]
    elif isinstance(value, list):
        elements = value
    else:
        return None
    if not elements:
        return None
    for element in elements:
        if (
            not isinstance(element, str)
            or len(element) > MAX_ELEMENT_LENGTH
            or _FORBIDDEN_IN_ELEMENT.search(element)
        ):
            return None
    return elements


def program_key(name: str) -> str:
    """What a deny rule compares a program name by: its base name, case-folded (a
    case-insensitive file system runs ``RM`` as ``rm``), without a Windows executable
    suffix."""
    key = unicodedata.normalize("NFKC", posixpath.basename(name).casefold())
    for suffix in _WINDOWS_SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix):
            return key[: -len(suffix)]
    return key


def _option_admitted(options: frozenset[str], element: str) -> bool:
    return element in options or element.partition("=")[0] in options


# --- the interface ------------------------------------------------------------------------


def compile_matcher(operand: Any) -> Callable[[Any], bool]:
    """``value -> bool`` for a validated operand (see the module docstring). Never raises."""
    programs = frozenset(operand["cmd"])
    max_args: int | None = operand.get("maxArgs")
    options = frozenset(operand["options"]) if "options" in operand else None

    def match_argv(value: Any) -> bool:
        elements = split(value)
        if elements is None or elements[0] not in programs:
            return False
        if max_args is not None and len(elements) - 1 > max_args:
            return False
        if options is None:
            return True
        return all(
            _option_admitted(options, element)
            for element in elements[1:]
            if element.startswith("-")
        )

    return match_argv


def compile_excluder(operand: Any) -> Callable[[Any], bool]:
    """``value -> bool`` for a validated operand: True only when the value is provably
    outside it, the fail-closed reading of a deny rule (see the module docstring). Never
    raises."""
    keys = frozenset(program_key(name) for name in operand["cmd"])
    max_args: int | None = operand.get("maxArgs")

    def exclude_argv(value: Any) -> bool:
        elements = split(value)
        if elements is None:
            return False
        program = elements[0]
        if not program or _ASSIGNMENT in program:
            return False
        if program_key(program) not in keys:
            return True
        return max_args is not None and len(elements) - 1 > max_args

    return exclude_argv


def _max_at_most(step: Mapping[str, Any], rule: Mapping[str, Any]) -> bool:
    """Every argument count the step admits, the rule admits (absent: unbounded)."""
    if "maxArgs" not in rule:
        return True
    return "maxArgs" in step and step["maxArgs"] <= rule["maxArgs"]


def relation(step: Any, rule: Any) -> str:
    """How the values a step's operand admits stand to those a rule's admits; exact.

    Disjoint when no program is in both (element 0 decides). Inside when every step program
    is a rule program and either the step admits no argument or both the argument count
    and the options fit (the step's options a subset of the rule's, or the rule lists
    none). Otherwise overlapping: ``[program]`` is common, and a step value with one
    argument more than the rule allows, or an option the rule does not list, is not."""
    try:
        step_programs, rule_programs = frozenset(step["cmd"]), frozenset(rule["cmd"])
        if step_programs.isdisjoint(rule_programs):
            return "disjoint"
        if not step_programs <= rule_programs:
            return "overlapping"
        if step.get("maxArgs") == 0:
            return "inside"
        if not _max_at_most(step, rule):
            return "overlapping"
        if "options" not in rule:
            return "inside"
        if "options" in step and frozenset(step["options"]) <= frozenset(rule["options"]):
            return "inside"
    except (TypeError, KeyError, AttributeError):  # not a validated operand
        return "undecidable"
    return "overlapping"


def deny_relation(step: Any, rule: Any) -> str:
    """How the values a step's operand admits stand to those a deny rule with operand
    `rule` matches (not provably outside it); exact. A step value's element 0 is one of the
    step's programs, so the deny matches it when that program's key is one of the rule's
    and its argument count is within the rule's ``maxArgs``; options play no part."""
    try:
        rule_keys = frozenset(program_key(name) for name in rule["cmd"])
        named = [program_key(name) in rule_keys for name in step["cmd"]]
        if not any(named):
            return "disjoint"
        if all(named) and _max_at_most(step, rule):
            return "inside"
    except (TypeError, KeyError, AttributeError):  # not a validated operand
        return "undecidable"
    return "overlapping"


def samples(operand: Any) -> list[Any]:
    """Honest values of a validated operand: its first program alone, as a list and as a
    string."""
    program: str = operand["cmd"][0]
    return [[program], program]
