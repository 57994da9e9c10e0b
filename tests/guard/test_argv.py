"""The ``argv`` operator (guard.commands, decision 0066): operand validation, the matcher
and the deny reading against a corpus of shell attacks and against plainly written
oracles, and both relations against brute force over a universe of command lines."""

from __future__ import annotations

import itertools
import json
import posixpath
import shlex
import unicodedata
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.commands import (
    MAX_ARGUMENTS,
    MAX_ELEMENT_LENGTH,
    MAX_OPTIONS,
    MAX_PROGRAMS,
    check_operand,
    compile_excluder,
    compile_matcher,
    deny_relation,
    relation,
    samples,
    split,
)
from guard.errors import FieldError

CORPUS = json.loads((Path(__file__).parent / "corpus" / "commands.json").read_text())
PATH = "steps[0].args.command.argv"


def problems(operand: object) -> list[FieldError]:
    errors: list[FieldError] = []
    check_operand(operand, PATH, errors)
    return errors


def valid(operand: dict[str, Any]) -> dict[str, Any]:
    assert problems(operand) == []
    return operand


# --- corpus ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry", CORPUS["values"], ids=[repr(entry["value"]) for entry in CORPUS["values"]]
)
def test_corpus_value_gets_its_verdict(entry: dict[str, Any]) -> None:
    operand = valid(entry.get("operand", CORPUS["operand"]))
    value = entry["value"]
    admitted = compile_matcher(operand)(value)
    if entry["verdict"] == "admitted":
        assert admitted, entry["why"]
        assert compile_excluder(valid(CORPUS["elsewhere"]))(value), entry["why"]
        assert not compile_excluder(operand)(value), entry["why"]
    elif entry["verdict"] == "refused":
        assert not admitted, entry["why"]
        reaches = valid(entry.get("reaches", {"cmd": operand["cmd"]}))
        assert not compile_excluder(reaches)(value), entry["why"]
    else:
        assert entry["verdict"] == "outside"
        assert not admitted, entry["why"]
        assert compile_excluder(valid(entry.get("deny", operand)))(value), entry["why"]


def test_corpus_holds_the_attacks_the_decision_names() -> None:
    refused = [
        entry["value"]
        for entry in CORPUS["values"]
        if entry["verdict"] == "refused" and isinstance(entry["value"], str)
    ]
    for attack in (
        "git; rm -rf /",
        "git && x",
        "git | x",
        "git $(x)",
        "git `x`",
        "git\nrm",
        "git\rrm",
        "/usr/bin/git status",
        "FOO=1 git status",
        "git --upload-pack=/tmp/x fetch",
        "git 'status",
    ):
        assert attack in refused
    admitted = [entry["value"] for entry in CORPUS["values"] if entry["verdict"] == "admitted"]
    assert "git status" in admitted
    assert ["pytest", "-q", "tests/"] in admitted
    assert "git log --oneline" in admitted


# --- validation -----------------------------------------------------------------------------


def test_valid_operands_have_no_problem() -> None:
    assert problems({"cmd": ["git"]}) == []
    assert problems({"cmd": ["git", "/usr/bin/git", "python3.11"], "maxArgs": 0}) == []
    assert problems({"cmd": ["git"], "maxArgs": MAX_ARGUMENTS, "options": []}) == []
    assert problems({"cmd": ["git"], "options": ["-q", "--oneline", "-", "--"]}) == []


@pytest.mark.parametrize(
    ("operand", "path", "detail"),
    [
        (["git"], PATH, "must be an object with 'cmd', not array"),
        ({}, f"{PATH}.cmd", "is required"),
        ({"cmd": "git"}, f"{PATH}.cmd", "must be an array of programs, not string"),
        ({"cmd": []}, f"{PATH}.cmd", "must hold at least 1 programs"),
        (
            {"cmd": ["git"] * (MAX_PROGRAMS + 1)},
            f"{PATH}.cmd",
            f"must hold at most {MAX_PROGRAMS} programs",
        ),
        ({"cmd": [""]}, f"{PATH}.cmd[0]", "must not be empty"),
        ({"cmd": ["git", 1]}, f"{PATH}.cmd[1]", "must be a string, not integer"),
        (
            {"cmd": ["-rf"]},
            f"{PATH}.cmd[0]",
            "must not start with '-' (a program name, not an option)",
        ),
        (
            {"cmd": ["FOO=1"]},
            f"{PATH}.cmd[0]",
            "must not hold '=' (a shell reads NAME=value as an assignment)",
        ),
        ({"cmd": ["git"], "maxArgs": -1}, f"{PATH}.maxArgs", "must be at least 0"),
        (
            {"cmd": ["git"], "maxArgs": MAX_ARGUMENTS + 1},
            f"{PATH}.maxArgs",
            f"must be at most {MAX_ARGUMENTS}",
        ),
        ({"cmd": ["git"], "maxArgs": True}, f"{PATH}.maxArgs", "must be an integer, not boolean"),
        ({"cmd": ["git"], "maxArgs": 2.0}, f"{PATH}.maxArgs", "must be an integer, not number"),
        (
            {"cmd": ["git"], "options": "-q"},
            f"{PATH}.options",
            "must be an array of options, not string",
        ),
        (
            {"cmd": ["git"], "options": ["-q"] * (MAX_OPTIONS + 1)},
            f"{PATH}.options",
            f"must hold at most {MAX_OPTIONS} options",
        ),
        ({"cmd": ["git"], "options": ["q"]}, f"{PATH}.options[0]", "must start with '-'"),
        (
            {"cmd": ["git"], "options": ["-q", "--format=short"]},
            f"{PATH}.options[1]",
            "must not hold '=': write '--format', which admits --format=<value>",
        ),
        (
            {"cmd": ["git"], "colour": "red"},
            f"{PATH}.colour",
            "unknown field (expected cmd, maxArgs, options)",
        ),
        ({"cmd": ["g" * 201]}, f"{PATH}.cmd[0]", "must be at most 200 characters"),
        (
            {"cmd": ["/usr/bin/"]},
            f"{PATH}.cmd[0]",
            "must not end with '/' (a program, not a directory)",
        ),
    ],
)
def test_operand_problem_is_reported_at_its_path(operand: object, path: str, detail: str) -> None:
    assert problems(operand) == [FieldError(path, detail)]


@pytest.mark.parametrize(
    "name", ["git;", "g it", "git\n", "'git'", 'g"it', "$GIT", "git*", "~/git", "a\\b", "g\u00a0it"]
)
def test_program_name_with_shell_syntax_is_refused(name: str) -> None:
    for operand, path in (
        ({"cmd": [name]}, f"{PATH}.cmd[0]"),
        ({"cmd": ["git"], "options": [f"-{name}"]}, f"{PATH}.options[0]"),
    ):
        errors = problems(operand)
        assert [error.path for error in errors] == [path]
        assert errors[0].detail.startswith("must not hold whitespace, quotes")


def test_every_problem_is_reported() -> None:
    errors = problems({"cmd": ["git", "", "a b"], "maxArgs": "2", "options": ["x"], "y": 1})
    assert [error.path for error in errors] == [
        f"{PATH}.y",
        f"{PATH}.cmd[1]",
        f"{PATH}.cmd[2]",
        f"{PATH}.maxArgs",
        f"{PATH}.options[0]",
    ]


# --- the oracle -----------------------------------------------------------------------------

METACHARACTERS = set(";&|`$()<>{}*?[]~!#\\")


def bad_character(character: str, *, quotes_allowed: bool) -> bool:
    """Plainly: a metacharacter, a control character (C0, DEL, C1), a lone surrogate, and
    in an element also a quote or whitespace."""
    code = ord(character)
    if character in METACHARACTERS or code < 0x20 or 0x7F <= code <= 0x9F:
        return True
    if 0xD800 <= code <= 0xDFFF:
        return True
    if quotes_allowed:
        return False
    return character in "'\"" or character.isspace()


def oracle_elements(value: object) -> list[str] | None:
    if isinstance(value, str):
        if len(value) > MAX_ELEMENT_LENGTH:
            return None
        if any(bad_character(character, quotes_allowed=True) for character in value):
            return None
        try:
            elements = shlex.split(value, posix=True)
        except ValueError:
            return None
    elif isinstance(value, list) and all(isinstance(element, str) for element in value):
        elements = value
    else:
        return None
    if not elements:
        return None
    for element in elements:
        if len(element) > MAX_ELEMENT_LENGTH:
            return None
        if any(bad_character(character, quotes_allowed=False) for character in element):
            return None
    return elements


def oracle_match(operand: dict[str, Any], value: object) -> bool:
    elements = oracle_elements(value)
    if elements is None or elements[0] not in operand["cmd"]:
        return False
    arguments = elements[1:]
    if "maxArgs" in operand and len(arguments) > operand["maxArgs"]:
        return False
    if "options" in operand:
        for argument in arguments:
            if argument.startswith("-") and not any(
                argument == option or argument.startswith(option + "=")
                for option in operand["options"]
            ):
                return False
    return True


def oracle_key(name: str) -> str:
    key = unicodedata.normalize("NFKC", posixpath.basename(name).casefold())
    for suffix in (".exe", ".com", ".bat", ".cmd"):
        if key.endswith(suffix) and key != suffix:
            key = key.removesuffix(suffix)
            break
    return key


def oracle_excluded(operand: dict[str, Any], value: object) -> bool:
    elements = oracle_elements(value)
    if elements is None or elements[0] == "" or "=" in elements[0]:
        return False
    if oracle_key(elements[0]) not in {oracle_key(name) for name in operand["cmd"]}:
        return True
    return "maxArgs" in operand and len(elements) - 1 > operand["maxArgs"]


# --- strategies -----------------------------------------------------------------------------

PROGRAMS = ["git", "rm", "/usr/bin/git", "pytest"]
OPTIONS = ["-q", "--oneline", "--format"]
TOKENS = [
    *PROGRAMS,
    "GIT",
    "Git.exe",
    "RM.EXE",
    "FOO=1",
    "status",
    "-q",
    "--oneline",
    "--format=x",
    "--format",
    "--upload-pack=/tmp/x",
    "-z",
    "-",
    "tests/",
    "",
]
PIECES = [
    *TOKENS,
    " ",
    "  ",
    "'",
    '"',
    "'a b'",
    '"-q"',
    "'a'",
    '"git"',
    "\n",
    "\r",
    "\t",
    "\x00",
    "\u00a0",
]
PIECES += [*sorted(METACHARACTERS), "$(x)", "&&", "\u00e9", "\uff47\uff49\uff54", "\ud800"]

operands = st.fixed_dictionaries(
    {"cmd": st.lists(st.sampled_from(PROGRAMS), min_size=1, max_size=3, unique=True)},
    optional={
        "maxArgs": st.integers(0, 3),
        "options": st.lists(st.sampled_from(OPTIONS), max_size=3, unique=True),
    },
)
raw_strings = st.lists(st.sampled_from(PIECES), max_size=8).map(
    lambda pieces: " ".join(pieces) if len(pieces) % 2 else "".join(pieces)
)
element_lists = st.lists(st.sampled_from(TOKENS) | st.sampled_from(PIECES), min_size=0, max_size=5)
command_values = raw_strings | element_lists | st.text(max_size=20) | st.integers() | st.none()


@given(operands, command_values)
def test_matcher_agrees_with_the_oracle(operand: dict[str, Any], value: object) -> None:
    assert compile_matcher(valid(operand))(value) == oracle_match(operand, value)


@given(operands, command_values)
def test_excluder_agrees_with_the_oracle(operand: dict[str, Any], value: object) -> None:
    excluded = compile_excluder(valid(operand))(value)
    assert excluded == oracle_excluded(operand, value)
    if compile_matcher(operand)(value):
        assert not excluded


@given(st.text(st.characters(exclude_characters="'\"\\\t\r\n"), max_size=40))
def test_quote_free_strings_split_as_shlex_splits_them(text: str) -> None:
    elements = split(text)
    if elements is not None:
        assert elements == shlex.split(text, posix=True)


@given(operands)
def test_samples_satisfy_the_operand(operand: dict[str, Any]) -> None:
    found = samples(operand)
    assert found == [[operand["cmd"][0]], operand["cmd"][0]]
    assert all(compile_matcher(operand)(value) for value in found)


def test_an_overlong_command_is_refused_and_never_provably_outside() -> None:
    value = "git " + "a" * MAX_ELEMENT_LENGTH
    assert not compile_matcher({"cmd": ["git"]})(value)
    assert not compile_excluder({"cmd": ["git"]})(value)
    assert not compile_excluder({"cmd": ["rm"]})(value)


# --- relations against brute force ---------------------------------------------------------

# Every command line of a program from PROGRAMS and its look-alikes followed by up to four
# arguments: plain ones, listed and unlisted options. Operands hold maxArgs <= 3, so every
# witness of a relation is in it.
HEADS = [*PROGRAMS, "GIT", "RM.exe", "bin/rm"]
ARGUMENT_TOKENS = ["a", "-q", "--oneline", "--format=x", "-z"]
UNIVERSE = tuple(
    (head, *arguments)
    for head in HEADS
    for count in range(5)
    for arguments in itertools.product(ARGUMENT_TOKENS, repeat=count)
)


def frozen(operand: dict[str, Any]) -> tuple[Any, ...]:
    return (
        tuple(operand["cmd"]),
        operand.get("maxArgs"),
        tuple(operand["options"]) if "options" in operand else None,
    )


def thawed(key: tuple[Any, ...]) -> dict[str, Any]:
    operand: dict[str, Any] = {"cmd": list(key[0])}
    if key[1] is not None:
        operand["maxArgs"] = key[1]
    if key[2] is not None:
        operand["options"] = list(key[2])
    return operand


@cache
def admitted(key: tuple[Any, ...]) -> frozenset[tuple[str, ...]]:
    matches = compile_matcher(thawed(key))
    return frozenset(value for value in UNIVERSE if matches(list(value)))


@cache
def matched_by_deny(key: tuple[Any, ...]) -> frozenset[tuple[str, ...]]:
    excludes = compile_excluder(thawed(key))
    return frozenset(value for value in UNIVERSE if not excludes(list(value)))


def brute_force(step_values: frozenset[Any], rule_values: frozenset[Any]) -> str:
    assert step_values, "every valid operand admits its program alone"
    if step_values <= rule_values:
        return "inside"
    if not step_values & rule_values:
        return "disjoint"
    return "overlapping"


@given(operands, operands)
def test_relation_is_exact(step: dict[str, Any], rule: dict[str, Any]) -> None:
    expected = brute_force(admitted(frozen(step)), admitted(frozen(rule)))
    assert relation(step, rule) == expected


@given(operands, operands)
def test_deny_relation_is_exact(step: dict[str, Any], rule: dict[str, Any]) -> None:
    expected = brute_force(admitted(frozen(step)), matched_by_deny(frozen(rule)))
    assert deny_relation(step, rule) == expected


@pytest.mark.parametrize(
    ("step", "rule", "expected"),
    [
        ({"cmd": ["git"]}, {"cmd": ["rm"]}, "disjoint"),
        ({"cmd": ["git"]}, {"cmd": ["git", "rm"]}, "inside"),
        ({"cmd": ["git", "rm"]}, {"cmd": ["git"]}, "overlapping"),
        ({"cmd": ["git"], "maxArgs": 2}, {"cmd": ["git"], "maxArgs": 3}, "inside"),
        ({"cmd": ["git"], "maxArgs": 3}, {"cmd": ["git"], "maxArgs": 2}, "overlapping"),
        ({"cmd": ["git"]}, {"cmd": ["git"], "maxArgs": 1000}, "overlapping"),
        ({"cmd": ["git"], "options": ["-q"]}, {"cmd": ["git"], "options": ["-q", "-v"]}, "inside"),
        (
            {"cmd": ["git"], "options": ["-q", "-v"]},
            {"cmd": ["git"], "options": ["-q"]},
            "overlapping",
        ),
        ({"cmd": ["git"]}, {"cmd": ["git"], "options": ["-q"]}, "overlapping"),
        ({"cmd": ["git"], "options": ["-q"]}, {"cmd": ["git"]}, "inside"),
        # No argument at all: options and counts cannot differ.
        ({"cmd": ["git"], "maxArgs": 0}, {"cmd": ["git"], "maxArgs": 0, "options": []}, "inside"),
        # /usr/bin/git is another name for the allow, the same program for a deny.
        ({"cmd": ["/usr/bin/git"]}, {"cmd": ["git"]}, "disjoint"),
    ],
)
def test_relation_named_cases(step: dict[str, Any], rule: dict[str, Any], expected: str) -> None:
    assert relation(valid(step), valid(rule)) == expected


@pytest.mark.parametrize(
    ("step", "rule", "expected"),
    [
        ({"cmd": ["/usr/bin/git"]}, {"cmd": ["git"]}, "inside"),
        ({"cmd": ["GIT.EXE"]}, {"cmd": ["git"]}, "inside"),
        ({"cmd": ["git", "rm"]}, {"cmd": ["rm"]}, "overlapping"),
        ({"cmd": ["git"]}, {"cmd": ["rm"]}, "disjoint"),
        # A deny with maxArgs matches only calls within it; options play no part.
        ({"cmd": ["git"]}, {"cmd": ["git"], "maxArgs": 2}, "overlapping"),
        ({"cmd": ["git"], "maxArgs": 2}, {"cmd": ["git"], "maxArgs": 2}, "inside"),
        ({"cmd": ["git"]}, {"cmd": ["git"], "options": ["-q"]}, "inside"),
    ],
)
def test_deny_relation_named_cases(
    step: dict[str, Any], rule: dict[str, Any], expected: str
) -> None:
    assert deny_relation(valid(step), valid(rule)) == expected


def test_relations_of_garbage_are_undecidable() -> None:
    assert relation({"cmd": 5}, {"cmd": ["git"]}) == "undecidable"
    assert relation({}, {"cmd": ["git"]}) == "undecidable"
    assert deny_relation({"cmd": ["git"]}, None) == "undecidable"
