"""Who may decide on a team's plans, one home for the queue, the e-mail and the checks."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from members.models import email_normalize
from plans.models import Plan

#: the permission the approval queue's Approve and Deny need (docs/decisions/0037)
DECIDE_PERMISSION = "notify.decide_approval"
#: the groups told about a waiting plan: those holding DECIDE_PERMISSION (the data
#: migration 0002_approvers_group grants it to exactly these)
DECIDER_GROUPS = ("Approvers", "Team admins")


def approver_users(plan: Plan) -> QuerySet:
    """The people told that ``plan`` awaits approval: active staff of the plan's team who
    are Approvers or Team admins, with an e-mail address, except the person the plan acts
    for (nobody decides on their own plan)."""
    users = (
        get_user_model()
        ._default_manager.filter(
            is_active=True,
            is_staff=True,
            plangate_teams=plan.team_id,
            groups__name__in=DECIDER_GROUPS,
        )
        .exclude(email="")
    )
    return users.exclude(email__iexact=email_normalize(plan.member.email)).distinct()
