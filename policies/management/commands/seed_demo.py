"""Seed a demo team for `make run`: an admin, members, a policy, an agent and its API key.

Every start runs it, so it only creates what is missing and never changes what exists: an
admin's edits (a new policy version, a disabled member, a changed password) survive a
restart. The demo agent's "make run" API key is the one ``--api-key`` names (`make run`
keeps it in var/local.env) while it is still the agent's usable key, made again with the
same text on a fresh database; without one, or once an admin revoked it or it expired, a
new key is made. The printed key is the one usable "make run" key: any other is revoked.
What it creates and revokes is in the team's activity log, as ``make run``'s (it passes
``--actor``).
"""

from __future__ import annotations

import os
import secrets
from typing import TypedDict

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import check_password
from django.db import transaction

from audit.changes import change_append, created_changes
from audit.doors import AuditedCommand
from members.models import API_KEY_FORMAT, Agent, ApiKey, Member
from members.services import (
    agent_create,
    api_key_create,
    api_key_revoke,
    member_upsert,
    team_get_or_create,
)
from policies.models import Policy
from policies.selectors import policy_active_version
from policies.services import policy_set
from teams.models import Team

DEMO_POLICY = {
    "version": 1,
    "default": "deny",
    "rules": [
        {
            "name": "read the team's repositories",
            "effect": "allow",
            "tools": ["github_*"],
            "args": {"repo": {"glob": "acme/*"}},
        },
        {"name": "never delete", "effect": "deny", "tools": ["github_delete_*"]},
        {
            "name": "mail inside the company",
            "effect": "allow",
            "tools": ["send_email"],
            "args": {"to": {"glob": "*@acme.dev"}},
        },
        {
            "name": "on-call SREs deploy",
            "effect": "allow",
            "tools": ["deploy"],
            "roles": ["sre"],
            "groups": ["oncall"],
            "maxCalls": 5,
        },
    ],
}
DEMO_MEMBER = "alice@acme.dev"


class DemoMember(TypedDict):
    email: str
    name: str
    role: str
    groups: list[str]


DEMO_MEMBERS: list[DemoMember] = [
    {"email": DEMO_MEMBER, "name": "Alice Example", "role": "engineer", "groups": ["platform"]},
    {
        "email": "sam@acme.dev",
        "name": "Sam Oncall",
        "role": "sre",
        "groups": ["oncall", "platform"],
    },
]
DEMO_POLICY_SLUG = "default"
DEMO_AGENT = "demo-agent"
API_KEY_NAME = "make run"


class Command(AuditedCommand):
    help = (
        "Create the demo team's missing objects (existing ones are left as they are) and "
        "print the credentials and the demo agent's API key: the one --api-key names while "
        "it is usable, else a new one; any other key printed by an earlier run is revoked."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--admin-user", default="admin")
        parser.add_argument(
            "--admin-password",
            default=os.environ.get("PLANGATE_DEMO_ADMIN_PASSWORD"),
            help="for a newly created admin; defaults to $PLANGATE_DEMO_ADMIN_PASSWORD, "
            "else a random one",
        )
        parser.add_argument("--base-url", default="http://localhost:8000")
        parser.add_argument(
            "--api-key",
            default=os.environ.get("PLANGATE_DEMO_API_KEY"),
            help="the demo agent's key to keep; defaults to $PLANGATE_DEMO_API_KEY",
        )

    def handle(
        self,
        *args,
        admin_user: str,
        admin_password: str | None,
        base_url: str,
        api_key: str | None,
        **kw,
    ):
        with transaction.atomic():
            team = team_get_or_create(slug="default", name="Acme")
            password_line = self._admin_get_or_create(team, admin_user, admin_password)
            for member in DEMO_MEMBERS:
                if not Member.objects.for_email(team, member["email"]).exists():
                    member_upsert(team=team, is_active=True, **member)
            agent = (
                Agent.objects.select_related("policy").filter(team=team, name=DEMO_AGENT).first()
            )
            if agent is None:
                agent = agent_create(team=team, name=DEMO_AGENT, policy=_demo_policy(team))
            version = policy_active_version(policy=agent.policy)
            plaintext = _api_key_for_this_start(agent, api_key)
        base = base_url.rstrip("/")
        self.stdout.write(f"Admin: {base}/admin/  user: {admin_user}  password: {password_line}")
        self.stdout.write(f"API docs: {base}/v1/docs")
        self.stdout.write(
            f"Agent: {agent.name} ({agent.id}), policy {agent.policy.slug} "
            f"v{version.number if version else '?'}"
        )
        self.stdout.write(f"API key: {plaintext}")
        self.stdout.write(f"Demo member: {DEMO_MEMBER}")

    def _admin_get_or_create(self, team: Team, username: str, password: str | None) -> str:
        """Create the admin if missing; return what to print after "password:"."""
        user_model = get_user_model()
        admin = user_model.objects.filter(username=username).first()
        if admin is None:
            password = password or secrets.token_urlsafe(12)
            admin = user_model.objects.create_superuser(username, "admin@acme.dev", password)
            team.staff.add(admin)
            change_append(
                team=team,
                object_type="user",
                object_id=admin.pk,
                name=username,
                action="created",
                changes=created_changes(
                    {"username": username, "email": admin.email, "is_superuser": True}
                ),
                extra={"staff_of": team.slug},
            )
            return password
        # An existing admin keeps its password: it may have been changed on purpose.
        if password is None:
            return "(unchanged: the one set when this admin was created)"
        if check_password(password, admin.password):
            return password
        return f"{password} (from var/local.env; it has been changed since, use the new one)"


def _demo_policy(team: Team) -> Policy:
    """The team's demo policy, published as version 1 only when it does not exist yet."""
    policy = Policy.objects.filter(team=team, slug=DEMO_POLICY_SLUG).first()
    if policy is not None:
        return policy
    return policy_set(
        team=team,
        slug=DEMO_POLICY_SLUG,
        document=DEMO_POLICY,
        comment="demo policy",
        created_by="seed_demo",
        description="What the demo agent may do",
    ).policy


def _api_key_for_this_start(agent: Agent, kept: str | None) -> str:
    """The "make run" key to print: ``kept`` while it is the agent's usable "make run" key,
    ``kept`` made again when no key has its lookup id (a fresh database), else a new key.
    Every other "make run" key of the agent is revoked first."""
    parsed = API_KEY_FORMAT.parse(kept) if kept else None
    stored = ApiKey.objects.filter(lookup_id=parsed[0]).first() if parsed else None
    keep = (
        parsed is not None
        and stored is not None
        and stored.agent_id == agent.pk
        and stored.name == API_KEY_NAME
        and stored.is_usable()
        and API_KEY_FORMAT.matches(stored.secret_hash, parsed[1])
    )
    earlier = ApiKey.objects.filter(agent=agent, name=API_KEY_NAME, revoked_at__isnull=True)
    for key in earlier.exclude(pk=stored.pk) if keep and stored else earlier:
        api_key_revoke(api_key=key)
    if keep and kept:
        return kept
    made_again = kept if parsed is not None and stored is None else None
    _, plaintext = api_key_create(agent=agent, name=API_KEY_NAME, plaintext=made_again)
    return plaintext
