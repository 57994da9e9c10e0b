"""POST /v1/plans/{id}/refresh with malformed tokens: always 401 invalid_token, never a 500,
and nothing written. Characters outside base64url (non-ASCII above all) may land in any of
the three segments. (NUL is refused earlier, as for any text in a body: 400.)"""

from __future__ import annotations

import pytest

from kernel.problems import Code
from plans.models import PlanToken

from .helpers import assert_problem, table_counts
from .test_plan_refresh_api import declare, refresh

SEGMENTS = ("header", "payload", "signature")


def with_text_in(token: str, segment: str, text: str, *, replace: bool = False) -> str:
    parts = token.split(".")
    index = SEGMENTS.index(segment)
    position = len(parts[index]) // 2
    tail = parts[index][position + 1 :] if replace else parts[index][position:]
    parts[index] = parts[index][:position] + text + tail
    return ".".join(parts)


@pytest.mark.parametrize("segment", SEGMENTS)
@pytest.mark.parametrize(
    ("text", "replace"),
    [
        ("é", False),
        ("é", True),
        ("\u2603", False),
        ("\U0001f600", True),
        ("\x7f", False),
        ("=", False),
        ("+", True),
        (".", False),
    ],
    ids=[
        "e-acute",
        "e-acute-replacing",
        "snowman",
        "emoji-replacing",
        "delete-char",
        "pad",
        "plus",
        "dot",
    ],
)
def test_a_token_with_a_foreign_character_is_invalid_token_and_writes_nothing(
    agent, segment, text, replace
):
    issued = declare(agent)
    before = table_counts()

    response = refresh(
        agent, issued["id"], with_text_in(issued["token"], segment, text, replace=replace)
    )

    assert_problem(response, 401, Code.INVALID_TOKEN)
    assert table_counts() == before
    assert list(PlanToken.objects.filter(plan_id=issued["id"]).values_list("kind", flat=True)) == [
        "issue"
    ]


@pytest.mark.parametrize(
    "mutate",
    [
        lambda token: token.replace(".", "é.", 1),
        lambda token: "é" + token,
        lambda token: token + "é",
        lambda token: token[:-1],
        lambda token: token.swapcase(),
        lambda token: token.replace(".", ".."),
        lambda token: ".".join(reversed(token.split("."))),
    ],
    ids=["before-dot", "prefix", "suffix", "truncated", "swapcase", "double-dots", "reversed"],
)
def test_other_mutations_of_a_valid_token_are_invalid_token(agent, mutate):
    issued = declare(agent)
    before = table_counts()

    response = refresh(agent, issued["id"], mutate(issued["token"]))

    assert_problem(response, 401, Code.INVALID_TOKEN)
    assert table_counts() == before
