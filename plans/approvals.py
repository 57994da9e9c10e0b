"""Approvals: a person approves or denies a plan that a policy's review rule sent to them.

A declared plan whose steps a review rule concerns (guard.policy_review.plan_reviews) is
saved as ``pending_approval`` with those steps and the team's deadline
(`plan_approval_request`); nothing is signed. A person then decides
(`plan_approval_decide`: never on a plan made for themselves, and a denial says why), or
nobody does within the team's window (`plans_approval_expire`, run by beat). Once approved,
the agent fetches its token (plans.approval_tokens), which carries ``apr``.

Each step appends its audit record (plans.records) in the transaction of the change. When
a plan starts waiting, `approval_requested` is sent once the transaction commits, so the
notifications that listen to it see the stored plan, and their failures never undo it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import (
    Case,
    CharField,
    DateTimeField,
    F,
    Q,
    QuerySet,
    TextField,
    Value,
    When,
)
from django.dispatch import Signal
from django.urls import reverse
from django.utils import timezone

from guard.claims import Approval
from guard.errors import FieldError
from guard.policy_review import StepReview, review_covers
from kernel.problems import Code, DomainError
from kernel.tracing import span

from .models import Plan
from .records import approval_decided_record, approval_expired_record, approval_requested_record

logger = logging.getLogger(__name__)

#: Sent once a plan that waits for approval is committed: ``sender=Plan, plan=<the Plan>``.
#: Receivers (e-mail, webhooks) must not raise: a failure is logged and the plan still
#: waits (send_robust).
approval_requested = Signal()

#: The permission to decide in the approval queue: notify's queue (a proxy of Plan) carries
#: it, so granting it needs no ``plans`` migration (docs/decisions/0037).
DECIDE_PERMISSION = "notify.decide_approval"
#: The warning (and the trail's word) for a plan that nobody can approve (0057).
APPROVAL_UNAVAILABLE = "approval_unavailable"

#: What the token endpoint's 409 asks a waiting client to wait before asking again.
APPROVAL_POLL_SECONDS = 5
#: The most a denial's reason keeps.
MAX_REASON_LENGTH = 2000


@dataclass(frozen=True)
class ApprovalRequested:
    """plan_issue's answer for a plan that waits for a person: nothing was signed."""

    plan: Plan
    review: tuple[dict[str, Any], ...]
    deadline: datetime
    #: why nobody can decide on the plan now (``approval_unavailable``); "" when someone can
    unavailable: str = ""


@dataclass(frozen=True)
class ApprovalDecision:
    """What plan_approval_decide stored."""

    plan: Plan
    approved: bool
    by: str
    at: datetime
    reason: str


def review_entries(reviews: Sequence[StepReview]) -> list[dict[str, Any]]:
    """The review steps as the plan keeps them and the API shows them."""
    return [
        {
            "path": f"plan.{review.path}",
            "step": review.step,
            "tool": review.tool,
            "rule": {"index": review.rule, "description": review.description},
        }
        for review in reviews
    ]


def approved_steps(plan: Plan) -> list[int]:
    """The steps a person approved (those the policy asked review of at declaration)."""
    return [entry["step"] for entry in plan.review]


def plans_awaiting_approval(plans: QuerySet | None = None) -> QuerySet[Plan]:
    """The plans waiting for a person's decision: the approval queue. A plan revoked while
    it waited is not (its approval stays ``pending``, undecided, on the record). Narrows
    ``plans`` (the admin queue's scoped rows) when given."""
    plans = Plan.objects.all() if plans is None else plans
    return plans.filter(status=Plan.Status.PENDING_APPROVAL, approval=Plan.Approval.PENDING)


def plan_approvers(plan: Plan) -> QuerySet:
    """Who can decide on ``plan`` and be told about it (docs/decisions/0057), the one
    queryset both asking (``notify.selectors``) and deciding (``plan_approver_refusal``)
    read: active staff
    with an e-mail address, never the person the plan acts for (``self_approval``), who
    are either a superuser or staff of the plan's team holding ``DECIDE_PERMISSION``
    (through a group, as Approvers and Team admins, or given to them directly)."""
    app_label, codename = DECIDE_PERMISSION.split(".")
    holds_permission = Q(
        groups__permissions__content_type__app_label=app_label,
        groups__permissions__codename=codename,
    ) | Q(
        user_permissions__content_type__app_label=app_label,
        user_permissions__codename=codename,
    )
    on_the_team = Q(plangate_teams=plan.team_id)
    people = get_user_model()._default_manager.filter(is_active=True, is_staff=True)
    return (
        people.exclude(email="")
        .exclude(email__iexact=plan.member.email.strip())
        .filter(Q(is_superuser=True) | (on_the_team & holds_permission))
        .distinct()
    )


def team_approvers(plan: Plan) -> QuerySet:
    """``plan_approvers`` who are staff of the plan's team: the people asked first."""
    return plan_approvers(plan).filter(plangate_teams=plan.team_id)


def approval_unavailable_detail(plan: Plan) -> str:
    """What the agent, the trail and the superusers are told about a plan nobody can
    approve."""
    return (
        f"Nobody can approve this plan: no approver of the team {plan.team.name} other than"
        f" {plan.member.email}, for whom it acts, and no superuser with an e-mail address"
        " may decide it. It waits until its deadline; an admin can add an approver to the"
        " team meanwhile."
    )


def plan_approval_columns(path: str = "") -> dict[str, Case]:
    """Annotations of a query reaching a plan by ``path`` (``"plan__"`` from its
    decisions): ``approved_by``, ``approved_at`` and ``approved_reason`` of an approved
    plan, null for any other (a denial is not an approval). Read from the joined row, so
    an export of many rows adds no query per row."""
    approved = Q(**{f"{path}approval": Plan.Approval.APPROVED})

    def when_approved(field: str, output: CharField | DateTimeField | TextField) -> Case:
        return Case(
            When(approved, then=F(f"{path}{field}")), default=Value(None), output_field=output
        )

    return {
        "approved_by": when_approved("approval_by", CharField()),
        "approved_at": when_approved("approval_decided_at", DateTimeField()),
        "approved_reason": when_approved("approval_reason", TextField()),
    }


def _waits(plan: Plan) -> bool:
    return plan.status == Plan.Status.PENDING_APPROVAL and plan.approval == Plan.Approval.PENDING


def _send_approval_requested(plan: Plan) -> None:
    for receiver, outcome in approval_requested.send_robust(sender=Plan, plan=plan):
        if isinstance(outcome, Exception):
            logger.error(
                "approval_requested receiver %r failed for plan %s: %r", receiver, plan.id, outcome
            )


def plan_approval_request(
    *, plan: Plan, reviews: Sequence[StepReview], now: datetime
) -> ApprovalRequested:
    """Save ``plan`` (unsaved, built by plan_issue) as waiting for a person, with the
    review steps and the team's deadline, and its ``approval_requested`` record; the
    signal goes out after commit. Runs in the caller's transaction or its own."""
    plan.status = Plan.Status.PENDING_APPROVAL
    plan.approval = Plan.Approval.PENDING
    plan.review = review_entries(reviews)
    plan.approval_deadline = now + timedelta(seconds=plan.team.approval_window_seconds)
    # Nobody who could decide: the plan still waits (an approver added within the window
    # can decide it), and the agent, the trail and the superusers are told at once.
    unavailable = "" if plan_approvers(plan).exists() else approval_unavailable_detail(plan)
    with transaction.atomic():
        plan.save(force_insert=True)
        approval_requested_record(plan=plan, unavailable=unavailable)
        transaction.on_commit(lambda: _send_approval_requested(plan))
    return ApprovalRequested(
        plan=plan,
        review=tuple(plan.review),
        deadline=plan.approval_deadline,
        unavailable=unavailable,
    )


def plan_approval(plan: Plan) -> Approval | None:
    """The ``apr`` claim of an approved plan's tokens; None when nobody had to approve."""
    if plan.approval != Plan.Approval.APPROVED or plan.approval_decided_at is None:
        return None
    return Approval(by=plan.approval_by, at=int(plan.approval_decided_at.timestamp()), ph=plan.hash)


def approval_still_covers(*, plan: Plan, reviews: Sequence[StepReview]) -> Approval | None:
    """The approval a token for ``plan`` carries under a policy that now asks ``reviews``.

    A plan approved for the same steps or more keeps its approval; ``approval_required``
    when the policy asks review of a step nobody approved (a plan that needed no approval
    before, or a step newly under review).
    """
    approval = plan_approval(plan)
    if reviews and (approval is None or not review_covers(approved_steps(plan), reviews)):
        covered = set(approved_steps(plan)) if approval is not None else set()
        raise DomainError(
            Code.APPROVAL_REQUIRED,
            "The policy now asks a person to approve steps nobody approved; declare the"
            " plan again to ask for approval.",
            errors=[
                FieldError(
                    f"plan.{review.path}",
                    f"{review.tool}: {review.description} asks for review",
                )
                for review in reviews
                if review.step not in covered
            ],
        )
    return approval


def acts_for(user: Any, plan: Plan) -> bool:
    """Whether ``user`` is the person ``plan`` acts for: the same e-mail in any case. Nobody
    decides on such a plan (``self_approval``); the queue uses it to draw no buttons."""
    email = str(getattr(user, "email", "") or "").strip()
    return bool(email) and email.casefold() == plan.member.email.casefold()


def plan_approver_refusal(plan: Plan, user: Any) -> DomainError | None:
    """Why ``user`` may not decide on ``plan``, or None when they may (docs/decisions/0057).

    The one rule for every door (the queue, ``manage.py decide_plan``,
    ``plan_approval_decide`` itself): ``user`` is one of ``plan_approvers(plan)``, the
    people who are asked, and is not the person the plan acts for (``acts_for``, which
    compares e-mails with full case folding too). An e-mail address is required to decide,
    not only to be told: the decision is recorded, and signed into ``apr``, as the
    approver's e-mail. The person as given is read too (a user just made inactive and not
    yet saved is refused); the messages say which part of the rule ``user`` misses.
    """
    if acts_for(user, plan):
        return DomainError(
            Code.SELF_APPROVAL,
            "Nobody decides on a plan made for themselves; ask another approver.",
        )
    if not getattr(user, "is_active", False) or not str(getattr(user, "email", "") or "").strip():
        return DomainError(
            Code.PERMISSION_DENIED, "Only an active person with an e-mail address can decide."
        )
    if not getattr(user, "is_staff", False):
        return DomainError(Code.PERMISSION_DENIED, "Only staff of the console decide on plans.")
    pk = getattr(user, "pk", None)
    if pk is not None and plan_approvers(plan).filter(pk=pk).exists():
        return None
    return DomainError(
        Code.PERMISSION_DENIED,
        f"Only a superuser, or staff of the team {plan.team.name} allowed to decide approvals"
        " (the Approvers or Team admins group), decides on its plans.",
    )


def plan_approver_may_decide(plan: Plan, user: Any) -> bool:
    """Whether ``user`` may approve or deny ``plan``: ``plan_approver_refusal`` is None."""
    return plan_approver_refusal(plan, user) is None


def _approver_email(plan: Plan, by_user: Any) -> str:
    refusal = plan_approver_refusal(plan, by_user)
    if refusal is not None:
        raise refusal
    return str(by_user.email).strip()


def plan_approval_decide(
    *,
    plan: Plan,
    by_user: Any,
    approve: bool,
    reason: str = "",
    now: datetime | None = None,
) -> ApprovalDecision:
    """`_approval_decide` in its own span (kernel.tracing): every door decides through it."""
    attributes = {"plangate.plan.id": plan.id, "plangate.team.id": plan.team_id}
    with span("plangate.approval.decide", **attributes) as current:
        try:
            decision = _approval_decide(
                plan=plan, by_user=by_user, approve=approve, reason=reason, now=now
            )
        except DomainError as error:
            if current is not None:
                current.set_attribute("plangate.code", error.code)
            raise
        if current is not None:
            current.set_attribute("plangate.code", "approved" if approve else "denied")
        return decision


def _approval_decide(
    *,
    plan: Plan,
    by_user: Any,
    approve: bool,
    reason: str = "",
    now: datetime | None = None,
) -> ApprovalDecision:
    """Approve or deny a plan waiting for a person.

    ``by_user`` is the person deciding (a Django user), one ``plan_approver_refusal``
    accepts: one of ``plan_approvers`` (active staff with an e-mail, a superuser or the
    team's staff holding ``DECIDE_PERMISSION``), never the plan's own member
    (``self_approval``); otherwise ``permission_denied``. A denial needs a ``reason``. Refused with
    ``approval_not_pending`` once decided, ``approval_expired`` past the deadline (the
    plan is then marked expired). Appends ``approval_decided``.
    """
    reason = reason.strip()
    now = now or timezone.now()
    email = _approver_email(plan, by_user)
    if not approve and not reason:
        raise DomainError(
            Code.INVALID_REQUEST,
            "A denial needs a reason: the agent shows it to its user.",
            errors=[FieldError("reason", "is required to deny")],
        )
    if len(reason) > MAX_REASON_LENGTH:
        raise DomainError(
            Code.INVALID_REQUEST,
            f"The reason is longer than {MAX_REASON_LENGTH} characters.",
            errors=[FieldError("reason", f"must have at most {MAX_REASON_LENGTH} characters")],
        )
    with transaction.atomic():
        current = Plan.objects.select_for_update().get(pk=plan.pk)
        if not _waits(current):
            raise DomainError(
                Code.APPROVAL_NOT_PENDING,
                f"The plan is not waiting for a decision (status: {current.status}).",
            )
        expired = current.approval_deadline is not None and current.approval_deadline <= now
        if not expired:
            plan.approval = Plan.Approval.APPROVED if approve else Plan.Approval.DENIED
            plan.status = Plan.Status.ACTIVE if approve else Plan.Status.APPROVAL_DENIED
            plan.approval_by, plan.approval_decided_at = email, now
            plan.approval_reason = reason
            plan.save(
                update_fields=[
                    "approval",
                    "status",
                    "approval_by",
                    "approval_decided_at",
                    "approval_reason",
                ]
            )
            approval_decided_record(plan=plan)
            return ApprovalDecision(plan=plan, approved=approve, by=email, at=now, reason=reason)
    # Past the deadline: the request expires (as the sweep would have), then the refusal.
    plan_approval_expire(plan=plan, now=now)
    raise DomainError(Code.APPROVAL_EXPIRED, "Nobody decided within the team's approval window.")


def plan_approval_expire(*, plan: Plan, now: datetime | None = None) -> bool:
    """Mark ``plan``'s request for approval expired if it is still pending past its
    deadline; appends ``approval_expired``. True when it changed."""
    now = now or timezone.now()
    with transaction.atomic():
        changed = (
            plans_awaiting_approval()
            .filter(pk=plan.pk, approval_deadline__lte=now)
            .update(approval=Plan.Approval.EXPIRED, status=Plan.Status.APPROVAL_EXPIRED)
        )
        if changed:
            plan.approval, plan.status = Plan.Approval.EXPIRED, Plan.Status.APPROVAL_EXPIRED
            approval_expired_record(plan=plan, at=now)
    return bool(changed)


def plans_approval_expire(*, now: datetime | None = None) -> int:
    """Expire every request for approval past its deadline (the beat task); how many.

    Idempotent, and safe when two workers run it: each plan changes under a conditional
    update, so only one of them records its expiry."""
    now = now or timezone.now()
    pending = (
        plans_awaiting_approval()
        .filter(approval_deadline__lte=now)
        .select_related("team", "agent", "member", "policy_version__policy")
    )
    return sum(plan_approval_expire(plan=plan, now=now) for plan in pending.iterator())


def approval_queue_url(plan: Plan) -> str:
    """The absolute address of ``plan`` in the admin's approval queue, where a person
    decides on it (the queue is notify's admin over plans, docs/decisions/0037): in the
    approvers' e-mail and webhook, and in the 202 answer to the agent that declared it."""
    path = reverse("admin:notify_approvalrequest_change", args=[quote(plan.pk)])
    return settings.PLANGATE_ISSUER.rstrip("/") + path
