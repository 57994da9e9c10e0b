"""Seed a demo team for `make run`: an admin, members, a policy, an agent and a fresh API key."""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from members.models import Agent
from members.services import agent_create, api_key_create, member_upsert, team_get_or_create
from policies.services import policy_set

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


class Command(BaseCommand):
    help = "Create (or top up) the demo team and print credentials and a fresh API key."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--admin-user", default="admin")
        parser.add_argument(
            "--admin-password",
            default=os.environ.get("PLANGATE_DEMO_ADMIN_PASSWORD"),
            help="defaults to $PLANGATE_DEMO_ADMIN_PASSWORD, else a random one",
        )
        parser.add_argument("--base-url", default="http://localhost:8000")

    def handle(self, *args, admin_user: str, admin_password: str | None, base_url: str, **kw):
        password = admin_password or secrets.token_urlsafe(12)
        with transaction.atomic():
            team = team_get_or_create(slug="default", name="Acme")
            user_model = get_user_model()
            admin = user_model.objects.filter(username=admin_user).first()
            if admin is None:
                admin = user_model.objects.create_superuser(admin_user, "admin@acme.dev", password)
            else:
                admin.set_password(password)
                admin.save(update_fields=["password"])
            team.staff.add(admin)
            member_upsert(
                team=team,
                email=DEMO_MEMBER,
                name="Alice Example",
                role="engineer",
                groups=["platform"],
                is_active=True,
            )
            member_upsert(
                team=team,
                email="sam@acme.dev",
                name="Sam Oncall",
                role="sre",
                groups=["oncall", "platform"],
                is_active=True,
            )
            version = policy_set(
                team=team,
                slug="default",
                document=DEMO_POLICY,
                comment="demo policy",
                created_by="seed_demo",
                description="What the demo agent may do",
            )
            agent = Agent.objects.filter(team=team, name="demo-agent").first()
            if agent is None:
                agent = agent_create(team=team, name="demo-agent", policy=version.policy)
            _, plaintext = api_key_create(agent=agent, name="make run")
        base = base_url.rstrip("/")
        self.stdout.write(f"Admin: {base}/admin/  user: {admin_user}  password: {password}")
        self.stdout.write(f"API docs: {base}/v1/docs")
        self.stdout.write(f"Agent: demo-agent ({agent.id}), policy default v{version.number}")
        self.stdout.write(f"API key: {plaintext}")
        self.stdout.write(f"Demo member: {DEMO_MEMBER}")
