"""Agent Client Protocol (ACP) plan updates: the ones the guard shows, and a tolerant reader.

Writing. The guard tells the agent's user how the declared plan progresses as
``session/update`` notifications:

* v2 (draft/unstable, the default): ``plan_update`` whose ``plan`` is ``{"type": "items",
  "planId": <plan id>, "entries": [...]}``, one entry per step, then ``plan_removed`` when
  the plan ends.
* v1 (stable), for a client that has not advertised plan support: ``sessionUpdate: "plan"``
  with ``entries``. v1 knows no ``cancelled`` status and no removal, so a cancelled step is
  sent as ``completed`` with its content prefixed ``[cancelled]`` (and ``_meta`` saying so):
  the step will not run any more, which is what the client must stop showing as pending or
  in progress. The end of a plan is its last update, with no removal.

Entries: readable content (tool and pinned arguments), priority ``high`` for required steps
and ``medium`` for the others, status ``pending`` -> ``in_progress`` (a call was allowed) ->
``completed`` (a call returned), or ``cancelled`` when the plan is revoked or blocked. A
plan a person must approve first shows every step as ``_awaiting_approval`` (a custom
status; v1, which has none, gets ``pending`` with its content prefixed ``[awaiting
approval]``), then ``pending`` once approved.

Reading. `read_plan_update` accepts any message and never raises: items, markdown and file
plans, ``plan_removed``, the v1 ``plan`` form, custom ``_``-prefixed content types,
priorities and statuses, and unknown future variants are all returned with the raw message
kept, as the protocol asks of receivers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypedDict

__all__ = [
    "AWAITING_APPROVAL",
    "CANCELLED",
    "COMPLETED",
    "IN_PROGRESS",
    "PENDING",
    "PlanEntryView",
    "PlanUpdateView",
    "describe_step",
    "notification",
    "plan_removed_params",
    "plan_update_params",
    "read_plan_update",
    "waits_for",
]

PENDING: Final = "pending"
IN_PROGRESS: Final = "in_progress"
COMPLETED: Final = "completed"
CANCELLED: Final = "cancelled"
# A custom status (ACP reserves ``_``-prefixed values for implementations): the step waits
# for a person to approve the plan; it becomes ``pending`` once approved.
AWAITING_APPROVAL: Final = "_awaiting_approval"

METHOD: Final = "session/update"
META_KEY: Final = "plangate"
_MAX_VALUE_TEXT: Final = 60


# --- writing -----------------------------------------------------------------------------


def _value_text(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    return text if len(text) <= _MAX_VALUE_TEXT else text[: _MAX_VALUE_TEXT - 3] + "..."


def _constraint_text(name: str, constraint: Mapping[str, Any]) -> str:
    ((operator, value),) = constraint.items()
    if operator == "eq":
        return f"{name} = {_value_text(value)}"
    if operator == "in":
        return f"{name} in {_value_text(value)}"
    if operator == "glob":
        return f"{name} like {value}"
    if operator == "regex":
        return f"{name} matches /{value}/"
    if operator == "lte":
        return f"{name} <= {_value_text(value)}"
    if operator == "gte":
        return f"{name} >= {_value_text(value)}"
    if operator == "subpath":
        return f"{name} under {value}"
    if operator == "url":
        return f"{name} a URL within {_value_text(value)}"
    if operator == "cidr":
        return f"{name} an address in {_value_text(value)}"
    if operator == "argv":
        return f"{name} a command of {_value_text(value)}"
    if operator == "type":
        return f"{name} of type {value}"
    if operator == "maxLength":
        return f"{name} at most {_value_text(value)} characters"
    return f"{name} {operator} {_value_text(value)}"  # pragma: no cover - validated plans


def describe_step(step: Mapping[str, Any], budgets: Sequence[Mapping[str, Any]] = ()) -> str:
    """A readable line for a normalised plan step, e.g.
    ``github_list_issues with repo = "acme/app" (up to 3 calls)``; a version-2 step also
    gives its id, the steps it comes after, whether it refuses other arguments and, from
    the plan's `budgets`, those that count its calls: ``refund: payments_refund with order
    = "A-1" (up to 20 calls, after read, no other arguments, amount counts in refunds up
    to 500)``."""
    text: str = step["tool"]
    step_id = step.get("id")
    if isinstance(step_id, str):
        text = f"{step_id}: {text}"
    args = step.get("args") or {}
    if args:
        text += " with " + ", ".join(
            _constraint_text(name, constraint) for name, constraint in args.items()
        )
    max_calls = step.get("maxCalls", 20)
    limits = [f"up to {max_calls} call{'s' if max_calls != 1 else ''}"]
    after = step.get("after") or ()
    if after:
        limits.append("after " + ", ".join(str(name) for name in after))
    if step.get("additionalArgs") is False:
        limits.append("no other arguments")
    limits.extend(
        f"{budget['arg']} counts in {budget['id']} up to {_value_text(budget['max'])}"
        for budget in _covering(step, budgets)
    )
    text += f" ({', '.join(limits)})"
    return text


def _covering(
    step: Mapping[str, Any], budgets: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The budgets of the plan that count the step's calls (they name its id)."""
    step_id = step.get("id")
    if not isinstance(step_id, str):
        return []
    return [budget for budget in budgets if step_id in budget.get("steps", ())]


def waits_for(steps: Sequence[Mapping[str, Any]], statuses: Sequence[str]) -> list[list[str]]:
    """For each step, the ids its ``after`` names whose step has not completed yet, in the
    order ``after`` gives them: what a call of that step still waits for."""
    completed = {
        step["id"]
        for step, status in zip(steps, statuses, strict=True)
        if status == COMPLETED and isinstance(step.get("id"), str)
    }
    return [[name for name in step.get("after") or () if name not in completed] for step in steps]


def plan_update_params(
    *,
    session_id: str,
    plan_id: str,
    goal: str,
    steps: Sequence[Mapping[str, Any]],
    statuses: Sequence[str],
    plan_updates: bool = True,
    approval_url: str | None = None,
    budgets: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The ``session/update`` params showing the plan with each step's status.

    `plan_updates` true gives the v2 ``plan_update`` (items); false the stable v1 ``plan``.
    Entries are the plan's steps in the plan's order. Each entry's ``_meta.plangate``
    names its step: ``index`` from 0 (in the plan's ``steps``) and ``number`` from 1, as
    texts for people count (``step`` is ``index``'s older name, kept for the clients that
    read it). A version-2 step adds its ``id`` when it has one and, when it comes after
    other steps, ``after`` (the ids it names) and ``waitsFor`` (those not completed yet:
    until it is empty, a call of the step is blocked ``out_of_order``) and ``budgets``, the
    ids of the plan's `budgets` that count its calls. `approval_url`,
    for a plan awaiting a person's approval, is where they decide: the plan's
    ``_meta.plangate.approvalUrl``.
    """
    entries = []
    waiting = waits_for(steps, statuses)
    for index, (step, status) in enumerate(zip(steps, statuses, strict=True)):
        content = describe_step(step, budgets)
        meta: dict[str, Any] = {
            "index": index,
            "number": index + 1,
            "step": index,
            "tool": step["tool"],
        }
        if isinstance(step.get("id"), str):
            meta["id"] = step["id"]
        if step.get("after"):
            meta["after"] = list(step["after"])
            meta["waitsFor"] = waiting[index]
        covering = _covering(step, budgets)
        if covering:
            meta["budgets"] = [budget["id"] for budget in covering]
        if not plan_updates and status == CANCELLED:
            content = f"[cancelled] {content}"
            meta["status"] = CANCELLED
            status = COMPLETED
        elif not plan_updates and status == AWAITING_APPROVAL:
            # v1 allows no custom status: the step has not started, which is `pending`.
            content = f"[awaiting approval] {content}"
            meta["status"] = AWAITING_APPROVAL
            status = PENDING
        entries.append(
            {
                "content": content,
                "priority": "high" if step.get("required") else "medium",
                "status": status,
                "_meta": {META_KEY: meta},
            }
        )
    plan_meta: dict[str, Any] = {"goal": goal}
    if approval_url is not None:
        plan_meta["approvalUrl"] = approval_url
    if plan_updates:
        update: dict[str, Any] = {
            "sessionUpdate": "plan_update",
            "plan": {
                "type": "items",
                "planId": plan_id,
                "entries": entries,
                "_meta": {META_KEY: plan_meta},
            },
        }
    else:
        update = {
            "sessionUpdate": "plan",
            "entries": entries,
            "_meta": {META_KEY: {"planId": plan_id, **plan_meta}},
        }
    return {"sessionId": session_id, "update": update}


def plan_removed_params(*, session_id: str, plan_id: str) -> dict[str, Any]:
    """The v2 ``session/update`` params removing the plan from the client's view."""
    return {"sessionId": session_id, "update": {"sessionUpdate": "plan_removed", "planId": plan_id}}


def notification(params: Mapping[str, Any]) -> dict[str, Any]:
    """Wrap ``session/update`` params in the JSON-RPC 2.0 notification an ACP agent sends."""
    return {"jsonrpc": "2.0", "method": METHOD, "params": dict(params)}


# --- reading -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanEntryView:
    """One entry as read. Fields that are absent or not strings are None; `raw` is as given.

    `priority` and `status` are kept whatever their value (``_custom`` ones included).
    """

    content: str | None
    priority: str | None
    status: str | None
    raw: Any


@dataclass(frozen=True)
class PlanUpdateView:
    """What a message says about a plan.

    `kind` is one of:

    * ``items``, ``markdown``, ``file``: a v2 ``plan_update`` of that content type;
    * ``other``: a v2 ``plan_update`` whose content type is custom (``_``-prefixed) or from a
      future version (see `content_type`);
    * ``removed``: ``plan_removed``;
    * ``legacy``: the v1 ``sessionUpdate: "plan"`` form (entries, no plan id);
    * ``not_plan``: a session update about something else (`session_update` says what);
    * ``unreadable``: not a session update at all.

    `raw` is always the message exactly as given, for storing and forwarding unchanged.
    `approval_url` is where a person approves a plan that awaits approval, when the plan's
    ``_meta.plangate.approvalUrl`` names one (Plangate's guard writes it).
    """

    kind: str
    raw: Any
    session_id: str | None = None
    session_update: str | None = None
    plan_id: str | None = None
    content_type: str | None = None
    entries: tuple[PlanEntryView, ...] = ()
    skipped_entries: int = 0
    markdown: str | None = None
    uri: str | None = None
    problems: tuple[str, ...] = field(default=())
    approval_url: str | None = None


def _string(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _entries(value: object) -> tuple[tuple[PlanEntryView, ...], int, list[str]]:
    """Entries read the way the reference implementation does: a bad entry is skipped."""
    if not isinstance(value, list):
        return (), 0, ([] if value is None else ["entries is not an array"])
    entries = []
    skipped = 0
    for item in value:
        if isinstance(item, Mapping) and isinstance(item.get("content"), str):
            entries.append(
                PlanEntryView(
                    content=item["content"],
                    priority=_string(item.get("priority")),
                    status=_string(item.get("status")),
                    raw=item,
                )
            )
        else:
            skipped += 1
    problems = [f"{skipped} entries without readable content were skipped"] if skipped else []
    return tuple(entries), skipped, problems


def _approval_url(holder: Mapping[str, Any]) -> str | None:
    """``_meta.plangate.approvalUrl`` of a plan (v2) or an update (v1), when it is text."""
    meta = holder.get("_meta")
    ours = meta.get(META_KEY) if isinstance(meta, Mapping) else None
    return _string(ours.get("approvalUrl")) if isinstance(ours, Mapping) else None


def _update_of(message: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The ``SessionUpdate`` object and session id of a notification, its params, or a bare
    update."""
    if "sessionUpdate" in message:
        return message, None
    params = message.get("params") if "params" in message else message
    if not isinstance(params, Mapping):
        return None, None
    return params.get("update"), _string(params.get("sessionId"))


def read_plan_update(message: object) -> PlanUpdateView:
    """Read an ACP message (a JSON-RPC notification, its params, or a bare session update)
    as a plan update. Never raises: anything it does not understand comes back with a kind
    of ``not_plan`` or ``unreadable`` and the raw message."""
    try:
        return _read(message)
    except Exception as error:
        return PlanUpdateView(kind="unreadable", raw=message, problems=(repr(error)[:200],))


class _Common(TypedDict):
    """The fields every view of a session update carries."""

    raw: Any
    session_id: str | None
    session_update: str | None


def _read(message: object) -> PlanUpdateView:
    if not isinstance(message, Mapping):
        return PlanUpdateView(kind="unreadable", raw=message, problems=("not an object",))
    update, session_id = _update_of(message)
    if not isinstance(update, Mapping):
        return PlanUpdateView(
            kind="unreadable", raw=message, session_id=session_id, problems=("no update",)
        )
    kind_name = update.get("sessionUpdate")
    if not isinstance(kind_name, str):
        return PlanUpdateView(
            kind="unreadable",
            raw=message,
            session_id=session_id,
            problems=("sessionUpdate is not a string",),
        )
    common: _Common = {"raw": message, "session_id": session_id, "session_update": kind_name}

    if kind_name == "plan_removed":
        return PlanUpdateView(kind="removed", plan_id=_string(update.get("planId")), **common)
    if kind_name == "plan":
        entries, skipped, problems = _entries(update.get("entries"))
        return PlanUpdateView(
            kind="legacy",
            entries=entries,
            skipped_entries=skipped,
            problems=tuple(problems),
            approval_url=_approval_url(update),
            **common,
        )
    if kind_name != "plan_update":
        return PlanUpdateView(kind="not_plan", **common)

    content = update.get("plan")
    if not isinstance(content, Mapping):
        return PlanUpdateView(kind="other", problems=("plan is not an object",), **common)
    content_type = _string(content.get("type"))
    plan_id = _string(content.get("planId"))
    if content_type == "items":
        entries, skipped, problems = _entries(content.get("entries"))
        return PlanUpdateView(
            kind="items",
            plan_id=plan_id,
            content_type=content_type,
            entries=entries,
            skipped_entries=skipped,
            problems=tuple(problems),
            approval_url=_approval_url(content),
            **common,
        )
    if content_type == "markdown":
        return PlanUpdateView(
            kind="markdown",
            plan_id=plan_id,
            content_type=content_type,
            markdown=_string(content.get("content")),
            **common,
        )
    if content_type == "file":
        return PlanUpdateView(
            kind="file",
            plan_id=plan_id,
            content_type=content_type,
            uri=_string(content.get("uri")),
            **common,
        )
    return PlanUpdateView(kind="other", plan_id=plan_id, content_type=content_type, **common)
