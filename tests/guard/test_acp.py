"""ACP plan updates: every message the guard emits is valid against the official schemas,
statuses follow the plan, and reading any plan update is tolerant.

The schemas are copies of the protocol's own files, in `acp_schemas/` (see its README).
"""

from __future__ import annotations

import functools
import json
import threading
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from guard.agent import acp
from guard.agent.acp import plan_removed_params, plan_update_params, read_plan_update
from guard.decisions import Decision
from guard.plan import validate_plan
from plans.models import Plan
from plans.services import plan_revoke
from tests.conftest import plan_document

from .strategies import json_values, plans, wild_values

SCHEMAS = Path(__file__).parent / "acp_schemas"
V2_FILE = "acp-v2-unstable.schema.json"
V1_FILE = "acp-v1.schema.json"
KNOWN_STATUSES = {"pending", "in_progress", "completed", "cancelled"}
REPO = {"repo": "acme/public-app"}


@functools.cache
def validator(file: str, definition: str) -> Draft202012Validator:
    """A validator for one `$defs` entry of an official schema file, `$ref`s resolved
    within the same file."""
    schema = json.loads((SCHEMAS / file).read_text())
    root = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    Draft202012Validator.check_schema(root)
    return Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)


def assert_valid_v2(params: dict[str, Any]) -> None:
    errors = [
        error.message
        for error in validator(V2_FILE, "UpdateSessionNotification").iter_errors(params)
    ]
    assert not errors, (errors[:3], params)


def assert_valid_v1(params: dict[str, Any]) -> None:
    errors = [
        error.message for error in validator(V1_FILE, "SessionNotification").iter_errors(params)
    ]
    assert not errors, (errors[:3], params)


def assert_notification(message: dict[str, Any]) -> dict[str, Any]:
    assert message["jsonrpc"] == "2.0"
    assert message["method"] == "session/update"
    assert "id" not in message  # a notification
    return message["params"]


def statuses(message: dict[str, Any]) -> list[str]:
    update = message["params"]["update"]
    entries = update["plan"]["entries"] if "plan" in update else update["entries"]
    return [entry["status"] for entry in entries]


THREE_STEPS = plan_document(
    steps=[
        {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}, "maxCalls": 3},
        {"tool": "github_get_issue", "args": {"repo": {"glob": "acme/*"}}, "required": True},
        {"tool": "send_email", "args": {"to": {"in": ["alice@acme.dev"]}}, "maxCalls": 1},
    ]
)


def test_every_v2_message_of_a_plans_life_is_valid_and_tracks_the_steps(make_guard, clock):
    messages: list[dict[str, Any]] = []
    guard = make_guard(acp_sink=messages.append, session_id="sess-1")
    declared = guard.declare(THREE_STEPS)

    guard.call("github_list_issues", REPO, lambda **args: [])
    guard.check("github_get_issue", REPO)  # allowed; the application has not said it returned
    guard.check("github_get_issue", REPO)  # no change, no message
    plan_revoke(plan=Plan.objects.get(pk=declared.plan_id))
    clock.advance(781)
    guard.refresh_if_due()
    blocked = guard.check("send_email", {"to": "alice@acme.dev"})
    guard.close()

    for message in messages:
        assert_valid_v2(assert_notification(message))
    updates = [m for m in messages if m["params"]["update"]["sessionUpdate"] == "plan_update"]
    assert [statuses(m) for m in updates] == [
        ["pending", "pending", "pending"],
        ["in_progress", "pending", "pending"],
        ["completed", "pending", "pending"],
        ["completed", "in_progress", "pending"],
        ["completed", "cancelled", "cancelled"],
    ]
    assert blocked.code == Decision.PLAN_REVOKED
    assert messages[-1]["params"] == {
        "sessionId": "sess-1",
        "update": {"sessionUpdate": "plan_removed", "planId": declared.plan_id},
    }
    first = updates[0]["params"]
    assert first["sessionId"] == "sess-1"
    plan = first["update"]["plan"]
    assert plan["type"] == "items"
    assert plan["planId"] == declared.plan_id
    assert [entry["priority"] for entry in plan["entries"]] == ["medium", "high", "medium"]
    assert [entry["content"] for entry in plan["entries"]] == [
        'github_list_issues with repo = "acme/public-app" (up to 3 calls)',
        "github_get_issue with repo like acme/* (up to 20 calls)",
        'send_email with to in ["alice@acme.dev"] (up to 1 call)',
    ]
    assert all(set(statuses(m)) <= KNOWN_STATUSES for m in updates)


def test_a_plan_that_ends_normally_completes_what_ran_and_is_removed(make_guard):
    messages: list[dict[str, Any]] = []
    guard = make_guard(acp_sink=messages.append)
    declared = guard.declare(THREE_STEPS)
    guard.check("github_list_issues", REPO)

    guard.end_plan()

    for message in messages:
        assert_valid_v2(assert_notification(message))
    assert statuses(messages[-2]) == ["completed", "pending", "pending"]
    assert messages[-1]["params"]["update"] == {
        "sessionUpdate": "plan_removed",
        "planId": declared.plan_id,
    }


def test_a_client_without_plan_support_gets_valid_v1_plans(make_guard, clock):
    messages: list[dict[str, Any]] = []
    guard = make_guard(acp_sink=messages.append, acp_plan_updates=False)
    declared = guard.declare(THREE_STEPS)
    guard.call("github_list_issues", REPO, lambda **args: [])
    plan_revoke(plan=Plan.objects.get(pk=declared.plan_id))
    guard.refresh()
    guard.close()

    for message in messages:
        assert_valid_v1(assert_notification(message))
    assert {m["params"]["update"]["sessionUpdate"] for m in messages} == {"plan"}
    assert statuses(messages[-1]) == ["completed", "completed", "completed"]
    cancelled = messages[-1]["params"]["update"]["entries"][1]
    assert cancelled["content"].startswith("[cancelled] github_get_issue")
    assert cancelled["_meta"]["plangate"]["status"] == "cancelled"
    assert messages[0]["params"]["update"]["_meta"]["plangate"]["planId"] == declared.plan_id


def test_a_failing_sink_never_breaks_a_call(make_guard):
    def broken_sink(message):
        raise RuntimeError("the client went away")

    guard = make_guard(acp_sink=broken_sink)
    guard.declare(THREE_STEPS)

    assert guard.call("github_list_issues", REPO, lambda **args: "ok") == "ok"


# A quarter of the profile: each example checks every update against both ACP schemas.
@settings(max_examples=settings.default.max_examples // 4)
@given(
    document=plans(),
    data=st.data(),
)
def test_updates_for_any_plan_and_statuses_are_valid_in_both_versions(document, data):
    plan = validate_plan(document)
    chosen = data.draw(
        st.lists(
            st.sampled_from(sorted(KNOWN_STATUSES)),
            min_size=len(plan["steps"]),
            max_size=len(plan["steps"]),
        )
    )
    common = {"session_id": "s", "plan_id": "p", "goal": plan["goal"], "steps": plan["steps"]}

    v2 = plan_update_params(**common, statuses=chosen)
    v1 = plan_update_params(**common, statuses=chosen, plan_updates=False)

    assert_valid_v2(v2)
    assert_valid_v1(v1)
    assert_valid_v2(plan_removed_params(session_id="s", plan_id="p"))
    json.dumps(v2, allow_nan=False)  # plain JSON, ready for the wire


# --- reading ---------------------------------------------------------------------------------


def test_the_guards_own_updates_read_back(make_guard):
    messages: list[dict[str, Any]] = []
    guard = make_guard(acp_sink=messages.append)
    declared = guard.declare(THREE_STEPS)
    guard.end_plan()

    first, removed = read_plan_update(messages[0]), read_plan_update(messages[-1])

    assert first.kind == "items"
    assert first.plan_id == declared.plan_id
    assert first.session_id == guard.session_id
    assert [(e.priority, e.status) for e in first.entries] == [
        ("medium", "pending"),
        ("high", "pending"),
        ("medium", "pending"),
    ]
    assert first.raw is messages[0]
    assert removed.kind == "removed" and removed.plan_id == declared.plan_id


def update(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": body},
    }


def test_every_plan_variant_is_read_and_kept_raw():
    custom_entry = {"content": "Review", "priority": "_urgent", "status": "_waiting"}
    cases = {
        "items": update(
            {
                "sessionUpdate": "plan_update",
                "plan": {"type": "items", "planId": "p1", "entries": [custom_entry, 7, {}]},
            }
        ),
        "markdown": update(
            {
                "sessionUpdate": "plan_update",
                "plan": {"type": "markdown", "planId": "p2", "content": "# Plan\n- step"},
            }
        ),
        "file": update(
            {
                "sessionUpdate": "plan_update",
                "plan": {"type": "file", "planId": "p3", "uri": "file:///plan.md"},
            }
        ),
        "custom": update(
            {"sessionUpdate": "plan_update", "plan": {"type": "_gantt", "planId": "p4", "x": 1}}
        ),
        "future": update(
            {"sessionUpdate": "plan_update", "plan": {"type": "mindmap", "planId": "p5"}}
        ),
        "removed": update({"sessionUpdate": "plan_removed", "planId": "p6"}),
        "legacy": {
            "sessionId": "s",
            "update": {
                "sessionUpdate": "plan",
                "entries": [{"content": "Review", "priority": "high", "status": "pending"}],
            },
        },
        "bare": {"sessionUpdate": "plan_removed", "planId": "p7"},
        "other update": update(
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": "m1",
                "content": {"type": "text", "text": "hi"},
            }
        ),
        "custom update": update({"sessionUpdate": "_progress", "value": 3}),
    }
    # The messages are valid ACP (v2, or v1 for the legacy form), except the bad entries
    # 7 and {} that a reader must skip, as the reference implementation does.
    for name, message in cases.items():
        params = message.get("params", message)
        if name == "legacy":
            assert_valid_v1(params)
        elif name not in {"bare", "items"}:
            assert_valid_v2(params)

    read = {name: read_plan_update(message) for name, message in cases.items()}

    assert read["items"].kind == "items"
    assert read["items"].plan_id == "p1"
    assert [(e.content, e.priority, e.status) for e in read["items"].entries] == [
        ("Review", "_urgent", "_waiting")
    ]
    assert read["items"].skipped_entries == 2
    assert read["markdown"].markdown == "# Plan\n- step"
    assert read["file"].uri == "file:///plan.md"
    assert (read["custom"].kind, read["custom"].content_type, read["custom"].plan_id) == (
        "other",
        "_gantt",
        "p4",
    )
    assert (read["future"].kind, read["future"].content_type) == ("other", "mindmap")
    assert (read["removed"].kind, read["removed"].plan_id) == ("removed", "p6")
    assert read["legacy"].kind == "legacy"
    assert read["legacy"].entries[0].status == "pending"
    assert (read["bare"].kind, read["bare"].plan_id) == ("removed", "p7")
    assert read["other update"].kind == "not_plan"
    assert read["custom update"].session_update == "_progress"
    for name, message in cases.items():
        assert read[name].raw is message


def test_malformed_messages_come_back_unreadable_not_raised():
    for message in [None, 3, "plan", [], {}, {"params": 1}, {"update": []}, {"sessionUpdate": 7}]:
        assert read_plan_update(message).kind == "unreadable"
    odd = read_plan_update(update({"sessionUpdate": "plan_update", "plan": {"type": "items"}}))
    assert odd.kind == "items" and odd.entries == () and odd.plan_id is None
    wrong = read_plan_update(update({"sessionUpdate": "plan_update", "plan": "x"}))
    assert wrong.kind == "other"


# Three times the profile: examples are cheap and arbitrary JSON is a wide space.
@settings(max_examples=3 * settings.default.max_examples)
@given(message=wild_values | json_values)
def test_reading_arbitrary_json_never_raises(message):
    assert read_plan_update(message).raw is message


plan_like = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["items", "markdown", "file", "_x", "new"]) | wild_values,
        "planId": st.text() | wild_values,
        "entries": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "content": st.text() | wild_values,
                    "priority": st.sampled_from(["high", "_p"]) | wild_values,
                    "status": st.sampled_from(list(KNOWN_STATUSES)) | wild_values,
                },
            )
            | wild_values
        )
        | wild_values,
        "content": wild_values,
        "uri": wild_values,
    },
)
session_update_like = st.fixed_dictionaries(
    {"sessionUpdate": st.sampled_from(["plan_update", "plan_removed", "plan", "_x"]) | wild_values},
    optional={"plan": plan_like | wild_values, "entries": wild_values, "planId": wild_values},
)


# Three times the profile: examples are cheap and arbitrary JSON is a wide space.
@settings(max_examples=3 * settings.default.max_examples)
@given(
    body=session_update_like,
    wrap=st.sampled_from(["notification", "params", "bare"]),
)
def test_reading_arbitrary_plan_shaped_messages_never_raises(body, wrap):
    message: Any = body
    if wrap == "params":
        message = {"sessionId": "s", "update": body}
    elif wrap == "notification":
        message = update(body)

    view = read_plan_update(message)

    assert view.raw is message
    assert view.kind in {
        "items",
        "markdown",
        "file",
        "other",
        "removed",
        "legacy",
        "not_plan",
        "unreadable",
    }
    assert all(isinstance(entry.content, str) for entry in view.entries)


def test_describe_step_shows_every_operator():
    step = {
        "tool": "t",
        "args": {
            "a": {"eq": 1},
            "b": {"in": [1, 2]},
            "c": {"glob": "x*"},
            "d": {"regex": "^y$"},
            "e": {"lte": 5},
            "f": {"gte": 0.5},
            "g": {"eq": "z" * 200},
        },
        "maxCalls": 20,
    }

    text = acp.describe_step(step)

    assert text.startswith(
        "t with a = 1, b in [1, 2], c like x*, d matches /^y$/, e <= 5, f >= 0.5"
    )
    assert '"zzz' in text and "..." in text
    assert text.endswith("(up to 20 calls)")


def test_concurrent_progress_ends_on_a_message_showing_the_final_state(make_guard):
    messages: list[dict[str, Any]] = []
    lock = threading.Lock()

    def sink(message: dict[str, Any]) -> None:
        with lock:
            messages.append(message)

    tools = [f"github_tool_{index}" for index in range(8)]
    guard = make_guard(acp_sink=sink)
    guard.declare(
        plan_document(
            steps=[{"tool": tool} for tool in tools],
        )
    )
    start = threading.Barrier(len(tools))

    def work(tool: str) -> None:
        start.wait()
        guard.call(tool, {"repo": "acme/app"}, lambda repo: None)

    threads = [threading.Thread(target=work, args=(tool,)) for tool in tools]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert statuses(messages[-1]) == ["completed"] * len(tools)
    for message in messages:
        assert_valid_v2(assert_notification(message))


def test_each_entry_names_its_step_by_index_and_number_in_both_versions():
    document = validate_plan(THREE_STEPS)
    for plan_updates in (True, False):
        params = plan_update_params(
            session_id="s",
            plan_id="p",
            goal=document["goal"],
            steps=document["steps"],
            statuses=["pending"] * 3,
            plan_updates=plan_updates,
        )
        update = params["update"]
        entries = update["plan"]["entries"] if plan_updates else update["entries"]

        # `index` into the plan's steps, `number` as people count; `step` = the index.
        assert [
            {key: entry["_meta"]["plangate"][key] for key in ("index", "number", "step")}
            for entry in entries
        ] == [{"index": i, "number": i + 1, "step": i} for i in range(3)]
        (assert_valid_v2 if plan_updates else assert_valid_v1)(params)


def test_a_plan_awaiting_approval_says_where_a_person_approves_it():
    document = validate_plan(THREE_STEPS)
    url = "http://localhost:8000/admin/notify/approvalrequest/p/change/"
    for plan_updates in (True, False):
        params = plan_update_params(
            session_id="s",
            plan_id="p",
            goal=document["goal"],
            steps=document["steps"],
            statuses=[acp.AWAITING_APPROVAL] * 3,
            plan_updates=plan_updates,
            approval_url=url,
        )

        assert read_plan_update(params).approval_url == url
        (assert_valid_v2 if plan_updates else assert_valid_v1)(params)
