"""Helpers for the approval tests: a policy with a review rule, an approver, decisions."""

from __future__ import annotations

from django.contrib.auth.models import Permission, User

from teams.models import Team

REVIEW_POLICY = {
    "version": 1,
    "default": "deny",
    "rules": [
        {"effect": "allow", "tools": ["github_*"], "args": {"repo": {"glob": "acme/*"}}},
        {"effect": "deny", "tools": ["github_delete_*"]},
        {"effect": "review", "tools": ["send_email"], "description": "mail leaves the company"},
    ],
}

REVIEWED_PLAN_STEPS = [
    {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}},
    {"tool": "send_email", "args": {"to": {"eq": "bob@example.test"}}},
]


def decide_permission() -> Permission:
    """``notify.decide_approval``, which a person needs to decide on a plan."""
    return Permission.objects.get(content_type__app_label="notify", codename="decide_approval")


def approver_for(team: Team, email: str = "carol@acme.dev", username: str = "carol") -> User:
    """A staff user of ``team`` who may decide on its plans: holding the decide permission
    (given directly: the Approvers group is a data migration, which a transactional test's
    flush removes)."""
    user = staff_of(team, email, username)
    user.user_permissions.add(decide_permission())
    return user


def staff_of(team: Team, email: str, username: str) -> User:
    """A staff user of ``team`` without the decide permission: not an approver."""
    user = User.objects.create_user(username, email, "pw-unused-here", is_staff=True)
    team.staff.add(user)
    return user
