"""ACP plan updates of version-2 plans: each entry names its step's id, the steps it comes
after and those it still waits for, and every message stays valid against the official
schemas (`acp_schemas/`)."""

from __future__ import annotations

from typing import Any

import pytest

from guard.agent import acp
from guard.agent.acp import plan_update_params

from .test_acp import assert_valid_v1, assert_valid_v2

# Normalised as validation leaves a version-2 plan: every step has `after` and
# `additionalArgs`, `id` when given.
STEPS: list[dict[str, Any]] = [
    {
        "id": "read",
        "tool": "fs_read",
        "args": {"path": {"subpath": "/srv/repo/src"}},
        "maxCalls": 20,
        "required": False,
        "after": [],
        "additionalArgs": True,
    },
    {
        "id": "review",
        "tool": "ask_reviewer",
        "args": {},
        "maxCalls": 1,
        "required": False,
        "after": [],
        "additionalArgs": True,
    },
    {
        "id": "write",
        "tool": "fs_write",
        "args": {"path": {"subpath": "/srv/repo/src"}, "text": {"maxLength": 10000}},
        "maxCalls": 5,
        "required": True,
        "after": ["read", "review"],
        "additionalArgs": False,
    },
    {
        "tool": "notify",
        "args": {"to": {"url": {"scheme": ["https"], "host": ["*.acme.dev"]}}},
        "maxCalls": 1,
        "required": False,
        "after": ["write"],
        "additionalArgs": True,
    },
]


def entries_of(params: dict[str, Any], plan_updates: bool) -> list[dict[str, Any]]:
    update = params["update"]
    return update["plan"]["entries"] if plan_updates else update["entries"]


def params_for(statuses: list[str], plan_updates: bool = True) -> dict[str, Any]:
    params = plan_update_params(
        session_id="s",
        plan_id="p",
        goal="Fix the bug",
        steps=STEPS,
        statuses=statuses,
        plan_updates=plan_updates,
    )
    (assert_valid_v2 if plan_updates else assert_valid_v1)(params)
    return params


@pytest.mark.parametrize("plan_updates", [True, False])
def test_entries_list_the_steps_in_order_with_ids_and_what_each_waits_for(plan_updates):
    entries = entries_of(params_for(["pending"] * 4, plan_updates), plan_updates)

    metas = [entry["_meta"]["plangate"] for entry in entries]
    assert [meta["index"] for meta in metas] == [0, 1, 2, 3]
    assert [meta.get("id") for meta in metas] == ["read", "review", "write", None]
    assert [meta.get("after") for meta in metas] == [None, None, ["read", "review"], ["write"]]
    assert [meta.get("waitsFor") for meta in metas] == [None, None, ["read", "review"], ["write"]]


def test_a_completed_step_is_no_longer_waited_for_and_a_running_one_still_is():
    # `read` completed, `review` allowed but still running: `write` waits for it alone.
    entries = entries_of(params_for(["completed", "in_progress", "pending", "pending"]), True)

    assert entries[2]["_meta"]["plangate"]["waitsFor"] == ["review"]
    assert entries[3]["_meta"]["plangate"]["waitsFor"] == ["write"]

    entries = entries_of(params_for(["completed", "completed", "completed", "pending"]), True)

    assert entries[2]["_meta"]["plangate"]["waitsFor"] == []
    assert entries[3]["_meta"]["plangate"]["waitsFor"] == []


def test_a_cancelled_step_is_not_completed_for_the_steps_after_it():
    # v1 sends a cancelled step as `completed`; what it waits for still reads the guard's
    # status, so the step after a cancelled one keeps waiting.
    entries = entries_of(params_for(["cancelled", "completed", "pending", "pending"], False), False)

    assert entries[0]["status"] == "completed"
    assert entries[2]["_meta"]["plangate"]["waitsFor"] == ["read"]


def test_describe_step_gives_id_order_and_closed_arguments():
    assert (
        acp.describe_step(STEPS[0])
        == "read: fs_read with path under /srv/repo/src (up to 20 calls)"
    )
    assert acp.describe_step(STEPS[2]) == (
        "write: fs_write with path under /srv/repo/src, text at most 10000 characters"
        " (up to 5 calls, after read, review, no other arguments)"
    )
    assert acp.describe_step(STEPS[3]).startswith(
        'notify with to a URL within {"scheme": ["https"]'
    )
    assert acp.describe_step(STEPS[3]).endswith("(up to 1 call, after write)")


def test_describe_step_shows_every_new_operator():
    step = {
        "tool": "t",
        "args": {
            "a": {"cidr": ["10.0.0.0/8"]},
            "b": {"argv": {"cmd": ["git"], "maxArgs": 4}},
            "c": {"type": "integer"},
            "d": {"maxLength": 3},
        },
        "maxCalls": 20,
    }

    assert acp.describe_step(step) == (
        't with a an address in ["10.0.0.0/8"], b a command of {"cmd": ["git"], "maxArgs": 4},'
        " c of type integer, d at most 3 characters (up to 20 calls)"
    )


def test_version_1_steps_read_as_before():
    step = {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/app"}}, "maxCalls": 3}
    entries = entries_of(
        plan_update_params(
            session_id="s", plan_id="p", goal="g", steps=[step], statuses=["pending"]
        ),
        True,
    )

    assert acp.describe_step(step) == 'github_list_issues with repo = "acme/app" (up to 3 calls)'
    assert set(entries[0]["_meta"]["plangate"]) == {"index", "number", "step", "tool"}


def test_the_guards_own_updates_say_what_a_step_waits_for_until_it_may_run(make_guard):
    messages: list[dict[str, Any]] = []
    guard = make_guard(acp_sink=messages.append)
    repo = {"repo": "acme/public-app"}
    guard.declare(
        {
            "version": 2,
            "goal": "Answer an issue after reading it",
            "user": "alice@acme.dev",
            "steps": [
                {"id": "read", "tool": "github_get_issue", "args": {"repo": {"eq": repo["repo"]}}},
                {
                    "id": "answer",
                    "tool": "github_comment",
                    "args": {"repo": {"eq": repo["repo"]}},
                    "after": ["read"],
                },
            ],
        }
    )

    early = guard.check("github_comment", repo)
    guard.call("github_get_issue", repo, lambda **args: {"title": "bug"})
    guard.call("github_comment", repo, lambda **args: "ok")

    assert early.code == "out_of_order"
    updates = [
        message["params"]
        for message in messages
        if message["params"]["update"]["sessionUpdate"] == "plan_update"
    ]
    for params in updates:
        assert_valid_v2(params)
    shown = [
        [
            (entry["status"], entry["_meta"]["plangate"].get("waitsFor"))
            for entry in params["update"]["plan"]["entries"]
        ]
        for params in updates
    ]
    assert shown == [
        [("pending", None), ("pending", ["read"])],
        [("in_progress", None), ("pending", ["read"])],
        [("completed", None), ("pending", [])],
        [("completed", None), ("in_progress", [])],
        [("completed", None), ("completed", [])],
    ]


def test_a_budgeted_step_names_the_budgets_that_count_its_calls():
    budgets = [
        {"id": "refunds", "arg": "amount", "steps": ["write", "read"], "max": 500},
        {"id": "bytes", "arg": "size", "steps": ["write"], "max": 1.5},
    ]
    params = plan_update_params(
        session_id="s",
        plan_id="p",
        goal="g",
        steps=STEPS,
        statuses=["pending"] * 4,
        budgets=budgets,
    )
    assert_valid_v2(params)
    entries = params["update"]["plan"]["entries"]

    assert [entry["_meta"]["plangate"].get("budgets") for entry in entries] == [
        ["refunds"],
        None,
        ["refunds", "bytes"],
        None,
    ]
    assert entries[2]["content"].endswith(
        "(up to 5 calls, after read, review, no other arguments,"
        " amount counts in refunds up to 500, size counts in bytes up to 1.5)"
    )
    assert acp.describe_step(STEPS[1], budgets) == "review: ask_reviewer (up to 1 call)"
