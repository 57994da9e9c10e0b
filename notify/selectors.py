"""Who is told that a plan awaits a person's approval: one home for the queue, the e-mail
and the checks. Who may decide is ``plans.approvals.plan_approvers`` (issuance reads it
too, to warn when nobody can); this module picks whom to e-mail among them."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from plans.approvals import DECIDE_PERMISSION, plan_approvers, team_approvers
from plans.models import Plan

__all__ = ["DECIDE_PERMISSION", "ApprovalRecipients", "approval_recipients", "approver_users"]


def approver_users(plan: Plan) -> QuerySet:
    """The team's own people who may decide on ``plan``: active staff of the plan's team
    holding the decide permission (Approvers, Team admins), or superusers among its staff,
    with an e-mail address, except the person the plan acts for."""
    return team_approvers(plan)


@dataclass(frozen=True)
class ApprovalRecipients:
    """Whom the e-mail about a waiting plan goes to, and why (docs/decisions/0057)."""

    #: sorted e-mail addresses
    emails: tuple[str, ...]
    #: "team": the team's approvers; "superusers": the team has none who may decide, so
    #: the superusers who may are asked; "unavailable": nobody may decide, the superusers
    #: are told so
    reach: str


def approval_recipients(plan: Plan) -> ApprovalRecipients:
    """The team's approvers; when it has none but the plan's own member, the superusers
    who may decide; when nobody may, every active superuser with an e-mail address (the
    plan's member included), told that nobody can approve it."""
    for reach, people in (("team", approver_users(plan)), ("superusers", plan_approvers(plan))):
        emails = tuple(sorted(set(people.values_list("email", flat=True))))
        if emails:
            return ApprovalRecipients(emails=emails, reach=reach)
    superusers = (
        get_user_model()
        ._default_manager.filter(is_active=True, is_superuser=True)
        .exclude(email="")
        .values_list("email", flat=True)
    )
    return ApprovalRecipients(emails=tuple(sorted(set(superusers))), reach="unavailable")
