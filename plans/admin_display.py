"""What the admin's plan page shows a person: the steps as a table, planned against actual,
and the Agent Client Protocol plan the agent showed its user.

Everything an agent sent is data, not markup: every value goes through ``format_html``.
The ACP reader is tolerant, as the protocol asks: any variant, custom value or malformed
message renders (unknown ones as raw JSON) and never raises.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Context, Decimal, Overflow

from django.db.models import Count, Sum
from django.utils import dateformat, timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from guard.decisions import Decision, steps_not_completed
from guard.plan import DEFAULT_MAX_CALLS
from kernel.admin_base import change_url
from kernel.json_format import compact_json, pretty_json

from .models import Plan, PlanDisplayUpdate, PlanEvent, PlanEventBatch

logger = logging.getLogger(__name__)

#: the newest blocked calls listed on a plan's page; every one is in the decisions list
BLOCKED_SHOWN = 50

OPERATOR_LABELS = {
    "eq": "=",
    "in": "is one of",
    "glob": "matches glob",
    "regex": "matches regex",
    "lte": "≤",
    "gte": "≥",
    "subpath": "is a path under",
    "url": "is a URL within",
    "cidr": "is an address in",
    "argv": "is a command of",
    "type": "is of type",
    "maxLength": "has at most this many characters:",
}


def constraints_html(args: object) -> SafeString:
    """``repo matches glob "acme/*"``, one argument a line; free arguments are not listed."""
    if not args:
        return format_html('<span class="plangate-badge muted">{}</span>', "any arguments")
    if not isinstance(args, dict):
        return format_html("<code>{}</code>", compact_json(args))
    lines = []
    for name, constraint in args.items():
        if isinstance(constraint, dict) and len(constraint) == 1:
            ((operator, value),) = constraint.items()
            label = OPERATOR_LABELS.get(operator, operator)
            lines.append(
                format_html("<code>{}</code> {} <code>{}</code>", name, label, compact_json(value))
            )
        else:
            lines.append(
                format_html("<code>{}</code> <code>{}</code>", name, compact_json(constraint))
            )
    return format_html_join(mark_safe("<br>"), "{}", ((line,) for line in lines))


def step_number(index: int | None) -> int | None:
    """The step as people count it, from 1, for a stored 0-based index. Every page that
    shows a step to a person goes through this, as the guard's texts do."""
    return None if index is None else index + 1


def step_label(index: int | None) -> str:
    """``step 2`` for the stored index 1; "no step" when the call matched none."""
    number = step_number(index)
    return "no step" if number is None else f"step {number}"


@dataclass
class StepReport:
    index: int
    tool: str
    constraints: SafeString
    max_calls: int
    required: bool
    used: int
    # False when the guard ended the plan saying the step did not complete (its calls
    # failed): allowed calls alone are not a run (docs/decisions/0058).
    completed: bool = True
    # Version 2: the step's id (None: it has none) and the ids it comes after.
    step_id: str | None = None
    after: tuple[str, ...] = ()
    #: false: a call passing an argument the step does not pin is blocked
    additional_args: bool = True
    #: the calls the guard blocked that matched this step, by code: [(code, count)]
    blocked: list[tuple[str, int]] = field(default_factory=list)

    @property
    def number(self) -> int | None:
        return step_number(self.index)

    @property
    def ran(self) -> bool:
        return self.used > 0 and self.completed

    @property
    def over_budget(self) -> bool:
        return self.used > self.max_calls

    @property
    def percent_used(self) -> int:
        return min(100, round(100 * self.used / self.max_calls)) if self.max_calls else 0


def step_reports(plan: Plan) -> list[StepReport]:
    """Each planned step with the calls the guard allowed against it and, by code, those it
    blocked that matched it (out_of_order, max_calls_exceeded, budget_exceeded...)."""
    used: dict[int, int] = {}
    blocked: dict[int, list[tuple[str, int]]] = {}
    for step_index, decision, total in (
        PlanEvent.objects.filter(plan=plan, step__isnull=False)
        # Not the model's ordering, which starts with the plan's and so joins the plans.
        .order_by()
        .values_list("step", "decision")
        .annotate(total=Count("id"))
        .values_list("step", "decision", "total")
        .order_by("step", "decision")
    ):
        if step_index is None:  # pragma: no cover - filtered out above
            continue
        if decision == Decision.ALLOWED:
            used[step_index] = total
        else:
            blocked.setdefault(step_index, []).append((decision, total))
    steps = plan.document.get("steps") if isinstance(plan.document, dict) else None
    not_completed = (
        steps_not_completed(plan.end_reason) if plan.status == Plan.Status.ENDED else frozenset()
    )
    reports = []
    for index, step in enumerate(steps if isinstance(steps, list) else []):
        step = step if isinstance(step, dict) else {}
        max_calls = step.get("maxCalls", DEFAULT_MAX_CALLS)
        reports.append(
            StepReport(
                index=index,
                tool=str(step.get("tool", "?")),
                constraints=constraints_html(step.get("args")),
                max_calls=max_calls if isinstance(max_calls, int) else DEFAULT_MAX_CALLS,
                required=step.get("required") is True,
                used=used.get(index, 0),
                completed=index not in not_completed,
                step_id=step["id"] if isinstance(step.get("id"), str) else None,
                after=tuple(str(name) for name in step.get("after") or ()),
                additional_args=step.get("additionalArgs") is not False,
                blocked=blocked.get(index, []),
            )
        )
    return reports


def plan_version(plan: Plan) -> int:
    """The plan language's version of a stored plan (1 when the document does not say)."""
    version = plan.document.get("version") if isinstance(plan.document, dict) else None
    return version if isinstance(version, int) else 1


@dataclass(frozen=True)
class BudgetReport:
    """One budget of a version-2 plan and what the guard's allowed calls counted against
    it, as they reported (decisions the guard lost are not in `used`)."""

    budget_id: str
    arg: str
    steps: tuple[str, ...]
    max: int | float
    used: int | Decimal

    @property
    def over(self) -> bool:
        return Decimal(self.used) > Decimal(str(self.max))

    @property
    def percent_used(self) -> int:
        maximum = Decimal(str(self.max))
        return min(100, round(100 * Decimal(self.used) / maximum)) if maximum > 0 else 0

    @property
    def meter_max(self) -> float:
        return float(self.max)

    @property
    def meter_value(self) -> float:
        return float(self.used)


# Exact, as the guard adds amounts (docs/decisions/0066 section 4): an int stays an int, a
# float is the decimal it was written as; a sum the context cannot keep exactly is shown
# as the nearest it can, which a person reading the page can live with.
_SUM_CONTEXT = Context(prec=60, traps=[Overflow])


def _add(total: int | Decimal, amount: object) -> int | Decimal:
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        return total  # the intake refuses these; an old or hand-made row is skipped
    if isinstance(amount, int) and isinstance(total, int):
        return total + amount
    if isinstance(amount, float) and not math.isfinite(amount):
        return total
    value = Decimal(repr(amount)) if isinstance(amount, float) else Decimal(amount)
    return _SUM_CONTEXT.add(Decimal(total), value)


def budget_reports(plan: Plan) -> list[BudgetReport]:
    """Each budget of the plan (none for version 1) with the sum of the amounts its
    allowed calls counted, read from the decisions the guard reported."""
    budgets = plan.document.get("budgets") if isinstance(plan.document, dict) else None
    if not isinstance(budgets, list) or not budgets:
        return []
    totals: dict[str, int | Decimal] = {}
    for amounts in (
        PlanEvent.objects.filter(plan=plan, decision=Decision.ALLOWED, amounts__isnull=False)
        .order_by()
        .values_list("amounts", flat=True)
        .iterator()
    ):
        if isinstance(amounts, dict):
            for budget_id, amount in amounts.items():
                totals[budget_id] = _add(totals.get(budget_id, 0), amount)
    reports = []
    for budget in budgets:
        if not isinstance(budget, dict):
            continue
        budget_id = str(budget.get("id", "?"))
        maximum = budget.get("max")
        reports.append(
            BudgetReport(
                budget_id=budget_id,
                arg=str(budget.get("arg", "?")),
                steps=tuple(str(step) for step in budget.get("steps") or ()),
                max=maximum if isinstance(maximum, int | float) else 0,
                used=totals.get(budget_id, 0),
            )
        )
    return reports


@dataclass(frozen=True)
class BlockedAttempt:
    event: PlanEvent

    @property
    def step_number(self) -> int | None:
        return step_number(self.event.step)

    @property
    def url(self) -> str:
        return change_url("plans", "planevent", self.event.pk)


@dataclass
class BlockedAttempts:
    total: int
    shown: list[BlockedAttempt] = field(default_factory=list)


def blocked_attempts(plan: Plan) -> BlockedAttempts:
    """Calls the guard refused, newest first."""
    queryset = PlanEvent.objects.filter(plan=plan).exclude(decision=Decision.ALLOWED)
    newest = queryset.order_by("-occurred_at", "-id")[:BLOCKED_SHOWN]
    return BlockedAttempts(
        total=queryset.count(), shown=[BlockedAttempt(event) for event in newest]
    )


def delivered_by_token(plan: Plan) -> int:
    """Decisions the agent's guard delivered with the plan's intent token, its API key
    refused (revoked, expired, the agent disabled): docs/decisions/0054."""
    return (
        PlanEventBatch.objects.filter(
            plan=plan, credential=PlanEventBatch.Credential.PLAN_TOKEN
        ).aggregate(events=Sum("events"))["events"]
        or 0
    )


# --- Agent Client Protocol plan updates ----------------------------------------------------

KNOWN_BADGES = {"pending", "in_progress", "completed", "cancelled", "high", "medium", "low"}


def _raw(message: object, note: str) -> SafeString:
    return format_html(
        '<p class="plangate-note">{}</p><pre class="plangate-pre">{}</pre>',
        note,
        pretty_json(message),
    )


def _badge(value: object) -> SafeString:
    text = value if isinstance(value, str) else compact_json(value)
    css = text if text in KNOWN_BADGES else "muted"
    if text == "high":
        css = "bad"
    elif text == "medium":
        css = "warn"
    elif text == "low":
        css = "muted"
    label = text.replace("_", " ") if text in KNOWN_BADGES else text
    return format_html('<span class="plangate-badge {}">{}</span>', css, label)


def _heading(variant: str, plan_id: object) -> SafeString:
    if isinstance(plan_id, str) and plan_id:
        return format_html(
            '<p class="plangate-note">{} · plan <code>{}</code></p>', variant, plan_id
        )
    return format_html('<p class="plangate-note">{}</p>', variant)


def _entries(entries: object, message: object, variant: str, plan_id: object) -> SafeString:
    if not isinstance(entries, list):
        return _raw(message, f"{variant} without a list of entries; shown as sent.")
    if not entries:
        return format_html("{}<p>{}</p>", _heading(variant, plan_id), "The plan has no entries.")
    rows = []
    for number, entry in enumerate(entries, start=1):
        if isinstance(entry, dict) and isinstance(entry.get("content"), str):
            rows.append(
                format_html(
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    number,
                    entry["content"],
                    _badge(entry["priority"]) if "priority" in entry else "—",
                    _badge(entry["status"]) if "status" in entry else "—",
                )
            )
        else:
            rows.append(
                format_html(
                    '<tr><td>{}</td><td colspan="3"><span class="plangate-note">{}</span> '
                    "<code>{}</code></td></tr>",
                    number,
                    "unreadable entry:",
                    compact_json(entry),
                )
            )
    return format_html(
        '{}<table class="plangate-table"><thead><tr><th>#</th><th>entry</th><th>priority</th>'
        "<th>status</th></tr></thead><tbody>{}</tbody></table>",
        _heading(variant, plan_id),
        format_html_join("", "{}", ((row,) for row in rows)),
    )


def _session_update(message: object) -> dict | None:
    """The ``session/update`` payload inside whatever envelope the agent kept: a JSON-RPC
    notification, its ``params`` (``{sessionId, update}``), or the update itself."""
    current = message
    if isinstance(current, dict) and isinstance(current.get("params"), dict):
        current = current["params"]
    if isinstance(current, dict) and isinstance(current.get("update"), dict):
        current = current["update"]
    return current if isinstance(current, dict) else None


def _render(message: object) -> SafeString:
    update = _session_update(message)
    if update is None:
        return _raw(message, "Not an ACP session update; shown as sent.")
    kind = update.get("sessionUpdate")
    if kind == "plan":  # ACP v1 (stable)
        return _entries(update.get("entries"), message, "ACP plan (v1)", None)
    if kind == "plan_removed":
        plan_id = update.get("planId")
        return format_html(
            "{}<p>{}</p>",
            _heading("ACP plan_removed", plan_id),
            "The agent removed the plan from its user's view: the plan ended.",
        )
    if kind != "plan_update":
        return _raw(
            message, f"An ACP update Plangate does not know ({compact_json(kind)}); shown as sent."
        )
    content = update.get("plan")
    if not isinstance(content, dict):
        return _raw(message, "A plan_update without plan content; shown as sent.")
    plan_type = content.get("type")
    plan_id = content.get("planId")
    if plan_type == "items":
        return _entries(content.get("entries"), message, "ACP plan_update (items)", plan_id)
    if plan_type == "markdown" and isinstance(content.get("content"), str):
        return format_html(
            '{}<pre class="plangate-pre">{}</pre>',
            _heading("ACP plan_update (markdown, shown as text)", plan_id),
            content["content"],
        )
    if plan_type == "file" and isinstance(content.get("uri"), str):
        return format_html(
            "{}<p>{} <code>{}</code></p>",
            _heading("ACP plan_update (file)", plan_id),
            "The plan is kept in a file:",
            content["uri"],
        )
    return _raw(
        message,
        f"An ACP plan_update of type {compact_json(plan_type)} Plangate does not read; "
        "shown as sent.",
    )


def acp_message_html(message: object) -> SafeString:
    """The message as a person reads it. Never raises: a reader must survive any input."""
    try:
        return _render(message)
    except Exception:
        logger.exception("could not render an ACP plan update")
        return _raw(message, "This update could not be read; shown as sent.")


def acp_summary(message: object) -> str:
    """One line about an ACP update, for a list of many: "3 entries: 1 completed, 2
    pending", "plan removed". Never raises."""
    update = _session_update(message)
    if update is None:
        return "not an ACP session update"
    kind = update.get("sessionUpdate")
    if kind == "plan_removed":
        return "plan removed"
    entries = update.get("entries")
    content = update.get("plan")
    if kind == "plan_update" and isinstance(content, dict):
        if content.get("type") != "items":
            return f"plan ({compact_json(content.get('type'))})"
        entries = content.get("entries")
    elif kind != "plan":
        return f"update {compact_json(kind)}"
    if not isinstance(entries, list):
        return "plan without readable entries"
    statuses: dict[str, int] = {}
    for entry in entries:
        status = entry.get("status") if isinstance(entry, dict) else None
        label = status.replace("_", " ") if isinstance(status, str) else "no status"
        statuses[label] = statuses.get(label, 0) + 1
    counted = ", ".join(f"{count} {label}" for label, count in statuses.items())
    return f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}" + (
        f": {counted}" if counted else ""
    )


@dataclass
class DisplayedPlan:
    total: int
    latest: PlanDisplayUpdate | None
    html: SafeString | None


def _is_removal(message: object) -> bool:
    update = _session_update(message)
    return update is not None and update.get("sessionUpdate") == "plan_removed"


# How far back to look for the last plan the user saw before a plan_removed.
_RECENT_UPDATES = 50


def displayed_plan(plan: Plan) -> DisplayedPlan:
    """The latest ACP plan update the agent reported showing its user. When that is a
    ``plan_removed``, the last plan shown before it follows: the state the user last saw."""
    updates = PlanDisplayUpdate.objects.filter(plan=plan)
    recent = list(updates.order_by("-received_at", "-id")[:_RECENT_UPDATES])
    if not recent:
        return DisplayedPlan(total=0, latest=None, html=None)
    latest = recent[0]
    html = acp_message_html(latest.message)
    if _is_removal(latest.message):
        shown = next((update for update in recent[1:] if not _is_removal(update.message)), None)
        if shown is not None:
            html = format_html(
                '{}<p class="plangate-note">{}</p>{}',
                html,
                "What the user saw last, before the plan was removed:",
                acp_message_html(shown.message),
            )
    return DisplayedPlan(total=updates.count(), latest=latest, html=html)


def plan_display_status(plan: Plan, now=None) -> str:
    """The status a person should read: an active plan past its end is expired."""
    if plan.status == Plan.Status.ACTIVE and plan.is_expired(now):
        return Plan.Status.EXPIRED
    return plan.status


def status_badge(status: str) -> SafeString:
    return format_html('<span class="plangate-badge {}">{}</span>', status, status)


def approval_html(plan: Plan) -> SafeString:
    """A plan's approval as a person reads it (docs/decisions/0057): who decided, when and
    why; or how long it waits, with its page in the approval queue; "" when no review rule
    asked for one. The plan's page and each of its decisions' pages show it."""
    if not plan.approval:
        return mark_safe("")
    when = plan.approval_decided_at
    reason = format_html(" · reason: {}", plan.approval_reason) if plan.approval_reason else ""
    if plan.approval in (Plan.Approval.APPROVED, Plan.Approval.DENIED) and when is not None:
        return format_html(
            '<span class="plangate-badge {}">{}</span> by {} at {}{}',
            "ok" if plan.approval == Plan.Approval.APPROVED else "bad",
            plan.approval,
            plan.approval_by,
            _moment(when),
            reason,
        )
    if plan.approval == Plan.Approval.EXPIRED:
        return format_html(
            '<span class="plangate-badge bad">expired</span> nobody decided by {}',
            _deadline(plan),
        )
    return format_html(
        '<span class="plangate-badge warn">pending</span> waits for a person until {} · '
        '<a href="{}">open it in the approval queue</a>',
        _deadline(plan),
        change_url("notify", "approvalrequest", plan.pk),
    )


def _moment(value: datetime) -> str:
    # As the plan's page writes its times (``date:"Y-m-d H:i:s e"``).
    return dateformat.format(timezone.localtime(value), "Y-m-d H:i:s e")


def _deadline(plan: Plan) -> str:
    return _moment(plan.approval_deadline) if plan.approval_deadline is not None else "—"


@dataclass(frozen=True)
class DelegatedChild:
    """A plan delegated from the one shown: its link, agent, status and reservation."""

    url: str
    plan: Plan
    status: str
    reserved: str


@dataclass(frozen=True)
class DelegationTree:
    """Where the plan stands among delegations: the plan it was delegated from (and what
    it reserved of it), the chain of agents, and the plans delegated from it."""

    parent_url: str | None
    parent_id: str | None
    chain: list[str]
    reserved: str
    children: list[DelegatedChild]

    def __bool__(self) -> bool:
        return self.parent_id is not None or bool(self.children)


def reservation_text(reserved: object) -> str:
    """``2 calls of step 1, 50 of budget spend``, as people count steps (from 1)."""
    if not isinstance(reserved, dict):
        return "—"
    parts = [
        f"{count} call{'s' if count != 1 else ''} of step {int(step) + 1}"
        for step, count in (reserved.get("calls") or {}).items()
    ]
    parts += [
        f"{amount} of budget {budget}" for budget, amount in (reserved.get("budgets") or {}).items()
    ]
    return ", ".join(parts) or "nothing"


def _actors(act: object) -> list[str]:
    """The agent ids of an ``act`` chain, the acting agent first."""
    chain: list[str] = []
    while isinstance(act, dict) and isinstance(act.get("sub"), str) and len(chain) < 16:
        chain.append(act["sub"])
        act = act.get("act")
    return chain


def delegation_tree(plan: Plan) -> DelegationTree:
    """The plan's parent and children, read in one query for the children."""
    children = [
        DelegatedChild(
            url=change_url("plans", "plan", child.pk),
            plan=child,
            status=plan_display_status(child),
            reserved=reservation_text(child.reserved),
        )
        for child in Plan.objects.filter(parent=plan)
        .select_related("agent")
        .order_by("created_at", "id")
    ]
    return DelegationTree(
        parent_url=change_url("plans", "plan", plan.parent_id) if plan.parent_id else None,
        parent_id=plan.parent_id,
        chain=_actors(plan.act),
        reserved=reservation_text(plan.reserved) if plan.parent_id else "",
        children=children,
    )
