"""Helpers for the approval tests: a policy with a review rule, an approver, decisions."""

from __future__ import annotations

from django.contrib.auth.models import User

from members.models import Team

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


def approver_for(team: Team, email: str = "carol@acme.dev", username: str = "carol") -> User:
    """A staff user of ``team`` who may decide on its plans."""
    user = User.objects.create_user(username, email, "pw-unused-here", is_staff=True)
    team.staff.add(user)
    return user
