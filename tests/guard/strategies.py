"""Hypothesis strategies for JSON values, constraints, plans and policies."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

MAX_SAFE_INTEGER = 2**53 - 1

safe_integers = st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
numbers = safe_integers | finite_floats

# Text a validated document may hold: any Unicode but NUL, which no database column takes.
document_characters = st.characters(codec="utf-8", exclude_characters="\x00")
json_scalars = (
    st.none()
    | st.booleans()
    | safe_integers
    | finite_floats
    | st.text(document_characters, max_size=20)
)

# JSON values a validated document may hold: they survive RFC 8785 canonicalisation.
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(document_characters, max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

# Anything json.loads can produce, and a little more: huge integers, NaN and infinities,
# lone surrogates (json.loads accepts "\ud800").
lone_surrogates = st.characters(categories=["Cs"])
wild_text = st.text(st.characters() | lone_surrogates, max_size=12)
wild_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | wild_text
    | st.sampled_from(["eq", "in", "glob", "regex", "lte", "gte", "[", "*", "(", "a@b.co"])
)
wild_values = st.recursive(
    wild_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(wild_text, children, max_size=4)
    ),
    max_leaves=20,
)

tool_names = st.from_regex(r"[a-zA-Z0-9_-]{1,64}", fullmatch=True)
argument_names = st.text(document_characters, min_size=1, max_size=12)
glob_patterns = st.text(alphabet="ab/-*?", max_size=10)
simple_regexes = st.sampled_from(["a+", "[a-z]*", "acme/.*", "(a|b)+c?", "", "x{2,3}"])


def constraints() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda value: {"eq": value}, json_values),
        st.builds(lambda members: {"in": members}, st.lists(json_values, min_size=1, max_size=4)),
        st.builds(lambda pattern: {"glob": pattern}, glob_patterns),
        st.builds(lambda pattern: {"regex": pattern}, simple_regexes),
        st.builds(lambda bound: {"lte": bound}, numbers),
        st.builds(lambda bound: {"gte": bound}, numbers),
    )


args_objects = st.dictionaries(argument_names, constraints(), max_size=3)

emails = st.builds(
    lambda local, domain, tld: f"{local}@{domain}.{tld}",
    st.from_regex(r"[a-z0-9._+]{1,10}", fullmatch=True),
    st.from_regex(r"[a-z0-9-]{1,10}", fullmatch=True),
    st.from_regex(r"[a-z]{2,6}", fullmatch=True),
)


@st.composite
def steps(draw: st.DrawFn) -> dict[str, Any]:
    step: dict[str, Any] = {"tool": draw(tool_names)}
    if draw(st.booleans()):
        step["args"] = draw(args_objects)
    if draw(st.booleans()):
        step["maxCalls"] = draw(st.integers(min_value=1, max_value=1_000_000))
    if draw(st.booleans()):
        step["required"] = draw(st.booleans())
    return step


@st.composite
def plans(draw: st.DrawFn, max_steps: int = 8) -> dict[str, Any]:
    """Valid plan documents, with optional fields present or not."""
    return {
        "version": 1,
        "goal": draw(st.text(document_characters, min_size=1, max_size=40).filter(str.strip)),
        "user": draw(emails),
        "steps": draw(st.lists(steps(), min_size=1, max_size=max_steps)),
    }


tool_globs = st.text(alphabet="ab_-*?", min_size=1, max_size=6)
role_names = st.sampled_from(["sre", "dev", "admin"])
group_names = st.sampled_from(["oncall", "platform", "security"])


@st.composite
def rules(draw: st.DrawFn) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "effect": draw(st.sampled_from(["allow", "deny", "review"])),
        "tools": draw(st.lists(tool_globs, min_size=1, max_size=3)),
    }
    if draw(st.booleans()):
        rule["args"] = draw(
            st.dictionaries(
                st.sampled_from(["repo", "n"]),
                st.one_of(
                    st.builds(lambda value: {"eq": value}, st.sampled_from(["a", "b", 1, 2])),
                    st.builds(lambda pattern: {"glob": pattern}, st.sampled_from(["a*", "*"])),
                    st.builds(lambda bound: {"lte": bound}, st.integers(0, 3)),
                ),
                max_size=2,
            )
        )
    if draw(st.booleans()):
        rule["roles"] = draw(st.lists(role_names, min_size=1, max_size=2))
    if draw(st.booleans()):
        rule["groups"] = draw(st.lists(group_names, min_size=1, max_size=2))
    if draw(st.booleans()):
        rule["maxCalls"] = draw(st.integers(min_value=1, max_value=30))
    return rule


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "version": 1,
        "default": draw(st.sampled_from(["allow", "deny"])),
        "rules": draw(st.lists(rules(), max_size=8)),
    }
