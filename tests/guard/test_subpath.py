"""The ``subpath`` operator (guard.paths, docs/decisions/0066 section 2): the bypass corpus,
the operand's normal form, the matcher against a plainly written oracle, and the relation
and deny relation against brute force over sampled paths."""

from __future__ import annotations

import json
import posixpath
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from guard import paths
from guard.errors import FieldError

from .strategies import wild_values

CORPUS = json.loads((Path(__file__).parent / "corpus" / "paths.json").read_text("utf-8"))
CORPUS_BASE: str = CORPUS["base"]
ATTACKS = [entry for entry in CORPUS["values"] if entry["verdict"] == "refused"]
HONEST = [entry for entry in CORPUS["values"] if entry["verdict"] == "admitted"]


def operand_errors(operand: object) -> list[str]:
    errors: list[FieldError] = []
    paths.check_operand(operand, "args.file.subpath", errors)
    assert all(error.path == "args.file.subpath" for error in errors)
    return [error.detail for error in errors]


def label(entry: dict[str, Any]) -> str:
    return ascii(entry["value"])[:60]


# --- the corpus ----------------------------------------------------------------------------


def test_corpus_holds_the_issue_attacks_and_honest_values() -> None:
    values = [entry["value"] for entry in CORPUS["values"]]
    for needle in ["../", "..%2f", "%2e%2e/", "..\\", "\u2025", "\uff0e\uff0e", "\uff0f", "\x00"]:
        assert any(isinstance(value, str) and needle in value for value in values), needle
    for value in ["//etc/passwd", "/srv/repo/src-x", "/srv/repo/src/../../etc", "src/a.py"]:
        assert value in values
    assert any(not isinstance(value, str) for value in values)
    honest = [entry["value"] for entry in HONEST]
    for value in ["/srv/repo/src/a.py", "/srv/repo/src", "/srv/repo//src/./b"]:
        assert value in honest
    assert "/srv/repo/src/x/../y" in honest
    assert all(entry["why"] for entry in CORPUS["values"])
    assert operand_errors(CORPUS_BASE) == []


@pytest.mark.parametrize("entry", ATTACKS, ids=label)
def test_every_attack_is_refused_and_never_provably_outside_what_it_reaches(
    entry: dict[str, Any],
) -> None:
    assert paths.compile_matcher(CORPUS_BASE)(entry["value"]) is False, entry["why"]
    assert operand_errors(entry["reaches"]) == []
    assert paths.compile_excluder(entry["reaches"])(entry["value"]) is False, entry["why"]


@pytest.mark.parametrize("entry", HONEST, ids=label)
def test_every_honest_value_is_admitted_and_provably_outside_elsewhere(
    entry: dict[str, Any],
) -> None:
    assert paths.compile_matcher(CORPUS_BASE)(entry["value"]) is True, entry["why"]
    assert paths.compile_excluder(CORPUS["elsewhere"])(entry["value"]) is True, entry["why"]
    # A deny on the base itself catches every honest value, whatever its spelling.
    assert paths.compile_excluder(CORPUS_BASE)(entry["value"]) is False, entry["why"]


# --- the operand ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operand", "normal"),
    [
        ("/srv/repo/", "/srv/repo"),
        ("/srv/./repo", "/srv/repo"),
        ("//srv", "/srv"),
        ("/srv//repo", "/srv/repo"),
        ("/srv/repo/..", "/srv"),
        ("/srv/x/../repo", "/srv/repo"),
        ("/./", "/"),
        ("/srv/\uff52\uff45\uff50\uff4f", "/srv/repo"),
    ],
)
def test_an_operand_out_of_normal_form_is_refused_naming_the_normal_form(
    operand: str, normal: str
) -> None:
    (detail,) = operand_errors(operand)
    assert detail.endswith(f"write {normal!r}")
    assert operand_errors(normal) == []


@pytest.mark.parametrize(
    ("operand", "detail"),
    [
        ("srv/repo", "must be an absolute path (start with '/')"),
        ("", "must be an absolute path (start with '/')"),
        ("/srv/../..", "climb above the root"),
        ("/srv/.../repo", "dots and spaces alone"),
        ("/srv/\x00", "control character"),
        ("/srv/\x1f", "control character"),
        ("/srv/\x7f", "control character"),
        ("/srv\\repo", "backslash"),
        ("/srv/%2e%2e", "percent escape"),
        ("/srv/\ud800", "lone surrogate"),
        ("/srv/\u2025", "unchanged by NFKC, which reads it as '/srv/..'"),
        ("/srv/a\uff0fb", "unchanged by NFKC, which reads it as '/srv/a/b'"),
        ("/srv/\uff05\uff12\uff45", "unchanged by NFKC"),
        (None, "must be a string (an absolute path), not null"),
        (["/srv"], "must be a string (an absolute path), not array"),
        ("/" + "a" * paths.MAX_BASE_LENGTH, "at most 4096 characters"),
    ],
)
def test_an_invalid_operand_is_refused(operand: object, detail: str) -> None:
    details = operand_errors(operand)
    assert details and detail in details[0], details


@pytest.mark.parametrize(
    "operand", ["/", "/srv/repo", "/srv/repo/src", "/a b/c.d", "/caf\u00e9", "/x:y", "/100%"]
)
def test_a_normal_operand_is_valid_and_its_samples_satisfy_it(operand: str) -> None:
    assert operand_errors(operand) == []
    matches = paths.compile_matcher(operand)
    assert operand in paths.samples(operand)
    assert len(paths.samples(operand)) >= 2
    assert all(matches(sample) for sample in paths.samples(operand))
    assert operand_errors("/" + "a" * (paths.MAX_BASE_LENGTH - 1)) == []


@given(st.text(st.sampled_from("/.a\uff0e\u2025\uff0f% 2e\\\x00"), max_size=10))
def test_a_suggested_normal_form_is_valid_and_reads_the_same(operand: str) -> None:
    details = operand_errors(operand)
    suggested = [detail for detail in details if "write '" in detail]
    if not details:
        assert paths.compile_matcher(operand)(operand)
    for detail in suggested:
        normal = detail.rsplit("write ", 1)[1].strip("'")
        assert operand_errors(normal) == []
        assert paths.compile_matcher(normal)(unicodedata.normalize("NFKC", operand))


# Mostly valid bases: segments of odd but allowed characters, joined by single slashes.
operand_texts = st.lists(
    st.text(
        st.sampled_from([".", " ", "a", ":", "%", "~", "\u00e9", "\u00df", "\u0301"])
        | st.characters(codec="utf-8", exclude_characters="/"),
        min_size=1,
        max_size=4,
    ),
    max_size=3,
).map(lambda segments: "/" + "/".join(segments))


@given(operand_texts)
def test_a_valid_operand_admits_its_samples_and_relates_to_itself_as_inside(
    operand: str,
) -> None:
    assume(operand_errors(operand) == [])
    matches, excludes = paths.compile_matcher(operand), paths.compile_excluder(operand)
    assert paths.samples(operand)
    for sample in paths.samples(operand):
        assert matches(sample) and not excludes(sample)
    assert paths.relation(operand, operand) == "inside"
    assert paths.deny_relation(operand, operand) == "inside"


@given(wild_values, st.sampled_from(["/", "/srv/repo", "/caf\u00e9"]))
def test_the_matcher_and_the_excluder_answer_a_boolean_for_any_value(
    value: Any, operand: str
) -> None:
    matched = paths.compile_matcher(operand)(value)
    excluded = paths.compile_excluder(operand)(value)
    assert isinstance(matched, bool) and isinstance(excluded, bool)
    assert not (matched and excluded)


def test_a_lone_surrogate_is_refused_and_never_provably_outside() -> None:
    # Not in the corpus: a strict JSON parser refuses "\ud800" (json.loads accepts it).
    value = "/srv/repo/src/a\ud800"
    assert paths.compile_matcher(CORPUS_BASE)(value) is False
    assert paths.compile_matcher("/")(value) is False
    assert paths.compile_excluder("/etc")(value) is False


def test_the_matcher_never_raises_on_a_hostile_string() -> None:
    class Hostile(str):
        def split(self, *args: object, **kwargs: object) -> list[str]:
            raise RuntimeError("no")

        def startswith(self, *args: object, **kwargs: object) -> bool:
            return True

    matches = paths.compile_matcher("/srv")
    assert matches(Hostile("/srv/a")) is True
    assert matches(Hostile("srv/a")) is False
    assert paths.compile_excluder("/srv")(Hostile("etc")) is False
    assert paths.compile_excluder("/srv")(Hostile("/etc")) is True


# --- the matcher against an oracle ---------------------------------------------------------

NAMES = ["a", "b", "src", "x.y", ".hidden", "..z"]
plain_names = st.sampled_from(NAMES)
bases = st.lists(plain_names, max_size=3)
# Segments of dots and spaces alone other than "." and "..", which Windows trims.
TRIMMED = ["...", " ", ". ", ".. "]
tokens = st.lists(st.sampled_from([*NAMES, ".", "..", "", *TRIMMED]), max_size=8)


def oracle(tokens: list[str], base: list[str], leading: str) -> bool:
    """Plainly: a segment Windows trims is refused; the value escapes when, reading left to
    right, more '..' than names have been seen; otherwise posixpath.normpath (given one
    leading slash) is where it lands."""
    if any(token in TRIMMED for token in tokens):
        return False
    depth = 0
    for token in tokens:
        if token == "..":
            depth -= 1
            if depth < 0:
                return False
        elif token not in ("", "."):
            depth += 1
    landed = posixpath.normpath("/" + "/".join(tokens))
    if landed.startswith("//"):
        landed = landed[1:]
    target = "/" + "/".join(base)
    return landed == target or landed.startswith(target.rstrip("/") + "/")


@given(tokens, bases, st.sampled_from(["/", "//", "///"]))
def test_the_matcher_agrees_with_the_oracle(
    tokens: list[str], base: list[str], leading: str
) -> None:
    value = leading + "/".join(tokens)
    operand = "/" + "/".join(base)
    assert paths.compile_matcher(operand)(value) is oracle(tokens, base, leading)


DISGUISES = {".": ["\uff0e", "\u2024", "\ufe52"], "..": ["\u2025", "\uff0e\uff0e", ".\u2024"]}


@given(tokens, bases, st.data())
def test_a_disguised_dot_segment_is_read_as_the_dot_segment(
    tokens: list[str], base: list[str], data: st.DataObject
) -> None:
    """A value with dot segments disguised as NFKC look-alikes is admitted only when the
    plain spelling is and the disguised segments, read literally, stay under the base."""
    disguised = [
        data.draw(st.sampled_from([token, *DISGUISES[token]])) if token in DISGUISES else token
        for token in tokens
    ]
    # Read literally, a disguised segment is a name like any other (and none of the base's).
    pairs = zip(tokens, disguised, strict=True)
    literal = [token if spelled == token else "n" for token, spelled in pairs]
    expected = oracle(tokens, base, "/") and oracle(literal, base, "/")
    operand = "/" + "/".join(base)
    assert paths.compile_matcher(operand)("/" + "/".join(disguised)) is expected


wild_paths = st.text(
    st.sampled_from(["/", ".", "a", "%", "2", "e", "F", "\\", "\x00", " ", "\u2025", "\uff0e"])
    | st.characters(codec="utf-8"),
    max_size=14,
)


@given(wild_paths, bases)
def test_an_admitted_value_is_clean_and_under_the_base_in_both_readings(
    value: str, base: list[str]
) -> None:
    operand = "/" + "/".join(base)
    if not paths.compile_matcher(operand)(value):
        return
    target = operand.rstrip("/") + "/"
    for reading in (value, unicodedata.normalize("NFKC", value)):
        assert reading.startswith("/")
        assert not any(ord(character) < 0x20 or character in "\x7f\\" for character in reading)
        landed = "/" + posixpath.normpath(reading).lstrip("/")
        assert landed == operand or landed.startswith(target)
    assert paths.compile_matcher(operand)(unicodedata.normalize("NFKC", value))
    assert paths.compile_matcher("/")(value)


@given(wild_paths | st.none() | st.integers(), bases)
def test_a_value_provably_outside_is_clean_and_outside_in_every_case(
    value: Any, base: list[str]
) -> None:
    operand = "/" + "/".join(base)
    if not paths.compile_excluder(operand)(value):
        return
    assert paths.compile_matcher("/")(value)  # every check passed, both readings resolve
    for spelling in {operand, operand.upper(), operand.title()}:
        assert not paths.compile_matcher(spelling)(value)


# --- the relations against brute force -------------------------------------------------------

# Segments whose spellings meet under case folding, compatibility forms, Windows trimming.
BASE_SEGMENTS = ["a", "b", "A", "ab", "\u00df", "ss", "SS", "a.", "a:b", "\u00e9", "K"]
VARIANTS = {
    "K": ["\u212a"],
    "\u00e9": ["e\u0301"],
    "a": ["\uff41"],
    "ss": ["\u1e9e"],
    "ab": ["a\u200cb", "a\ufe0fb"],
}
relation_bases = st.lists(st.sampled_from(BASE_SEGMENTS), max_size=3).map(
    lambda segments: "/" + "/".join(segments)
)


def spellings(base: str) -> set[str]:
    """`base`, its case variants, and some look-alike and trimmed spellings."""
    segments = base.split("/")[1:] if base != "/" else []
    found = {base, base.upper(), base.lower(), base.casefold()}
    for index, segment in enumerate(segments):
        for other in [*VARIANTS.get(segment, []), segment + ".", segment + "::$DATA"]:
            found.add("/" + "/".join([*segments[:index], other, *segments[index + 1 :]]))
    return found


def universe(step: str, rule: str) -> list[Any]:
    step_segments = step.split("/")[1:] if step != "/" else []
    rule_segments = rule.split("/")[1:] if rule != "/" else []
    values: set[str] = {"/", "/a", "/zz"}
    for base in (step, rule):
        for spelled in spellings(base):
            values.update({spelled, spelled.rstrip("/") + "/c", spelled.rstrip("/") + "/A/b"})
    for index in range(len(rule_segments) + 1):
        joined = "/".join([*step_segments, *rule_segments[index:]])
        values.add("/" + joined)
        values.update(spelling + "/x" for spelling in spellings("/" + joined))
    values.update(value + "/.." for value in list(values))
    return [*sorted(values), None, 3, "relative", "/a/%2e%2e", "/a\\b"]


@given(relation_bases, relation_bases)
def test_the_relation_agrees_with_brute_force(step: str, rule: str) -> None:
    check_relation(step, rule)


@given(relation_bases, relation_bases)
def test_the_deny_relation_agrees_with_brute_force(step: str, rule: str) -> None:
    check_deny_relation(step, rule)


def check_relation(step: str, rule: str) -> None:
    assert operand_errors(step) == [] and operand_errors(rule) == []
    answer = paths.relation(step, rule)
    step_matches, rule_matches = paths.compile_matcher(step), paths.compile_matcher(rule)
    admitted = [value for value in universe(step, rule) if step_matches(value)]
    shared = [value for value in admitted if rule_matches(value)]
    assert admitted
    if answer == "inside":
        assert shared == admitted, (step, rule)
    elif answer == "disjoint":
        assert shared == [], (step, rule)
    else:
        assert answer == "overlapping"
        assert shared and shared != admitted, (step, rule)


def check_deny_relation(step: str, rule: str) -> None:
    answer = paths.deny_relation(step, rule)
    step_matches, excludes = paths.compile_matcher(step), paths.compile_excluder(rule)
    admitted = [value for value in universe(step, rule) if step_matches(value)]
    denied = [value for value in admitted if not excludes(value)]
    if answer == "inside":
        assert denied == admitted, (step, rule)
    elif answer == "disjoint":
        assert denied == [], (step, rule)
    else:
        assert answer == "overlapping"
        assert denied and denied != admitted, (step, rule)


@given(operand_texts, operand_texts, st.integers(0, 3), st.booleans())
def test_the_relations_agree_with_brute_force_for_unicode_bases(
    first: str, second: str, cut: int, nested: bool
) -> None:
    """Bases of any characters, one often nested in the other: the witnesses the relations
    rely on (a base followed by the other's extra segments) are admitted as claimed."""
    assume(operand_errors(first) == [] and operand_errors(second) == [])
    segments = first.split("/")[1:] if first != "/" else []
    step = "/" + "/".join(segments[:cut]) if nested else first
    rule = (first.rstrip("/") + second) if nested and second != "/" else second
    assume(operand_errors(step) == [] and operand_errors(rule) == [])
    for one, other in ((step, rule), (rule, step)):
        check_relation(one, other)
        check_deny_relation(one, other)


@pytest.mark.parametrize(
    ("step", "rule", "allow", "deny"),
    [
        ("/srv/repo/src", "/srv/repo", "inside", "inside"),
        ("/srv/repo", "/srv/repo/src", "overlapping", "overlapping"),
        ("/srv/repo/src", "/srv/repo/src-x", "disjoint", "disjoint"),
        ("/srv/repo", "/srv/repo", "inside", "inside"),
        ("/", "/srv", "overlapping", "overlapping"),
        ("/srv", "/", "inside", "inside"),
        ("/SRV/repo", "/srv", "disjoint", "inside"),
        ("/srv/Stra\u00dfe", "/srv/STRASSE", "disjoint", "inside"),
        ("/srv/secret.", "/srv/secret", "disjoint", "inside"),
        ("/srv", "/SRV/repo", "disjoint", "overlapping"),
    ],
)
def test_named_relations(step: str, rule: str, allow: str, deny: str) -> None:
    assert paths.relation(step, rule) == allow
    assert paths.deny_relation(step, rule) == deny
