"""`manage.py seed_demo`, which every `make run` start runs: it creates what is missing,
never undoes what an admin changed, and renews the printed API key."""

from __future__ import annotations

import copy
import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from kernel.problems import Code, DomainError
from members.models import Agent, ApiKey, Member
from members.services import api_key_authenticate, member_disable
from policies.management.commands.seed_demo import DEMO_POLICY
from policies.models import Policy
from policies.selectors import policy_active_version
from policies.services import policy_version_publish
from teams.models import Team

PASSWORD = "first-start-password"


def seed(*options: str) -> tuple[str, str]:
    """Run the command as `make run` does; return its output and the printed API key."""
    out = StringIO()
    call_command("seed_demo", "--admin-password", PASSWORD, *options, stdout=out)
    output = out.getvalue()
    match = re.search(r"^API key: (pg_\S+)$", output, re.MULTILINE)
    assert match, output
    assert re.search(r"^Demo member: alice@acme\.dev$", output, re.MULTILINE), output
    return output, match.group(1)


def authenticates(plaintext: str) -> bool:
    try:
        api_key_authenticate(plaintext)
    except DomainError as exc:
        assert exc.code == Code.INVALID_API_KEY
        return False
    return True


@pytest.mark.django_db
def test_a_second_seed_keeps_the_admins_edits_and_replaces_the_printed_key():
    _, first_key = seed()
    team = Team.objects.get(slug="default")
    policy = Policy.objects.get(team=team, slug="default")
    # What an admin does between two starts, through the same services as the admin site.
    edited = copy.deepcopy(DEMO_POLICY)
    edited["rules"] = [rule for rule in edited["rules"] if rule["tools"] != ["send_email"]]
    assert policy_version_publish(policy=policy, document=edited, created_by="admin").number == 2
    member_disable(team=team, email="alice@acme.dev")
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("changed-in-the-admin")
    admin.save()
    counts = {
        model: model.objects.count() for model in (Team, Member, Policy, Agent, get_user_model())
    }

    output, second_key = seed()

    version = policy_active_version(policy=policy)
    assert version.number == 2 and version.policy.versions.count() == 2
    assert "send_email" not in str(version.document)
    assert Member.objects.get(email="alice@acme.dev").is_active is False
    admin.refresh_from_db()
    assert admin.check_password("changed-in-the-admin")
    assert "changed since" in output
    assert {model: model.objects.count() for model in counts} == counts
    assert "policy default v2" in output
    # Exactly one usable "make run" key, the one just printed; the previous one is revoked.
    active = ApiKey.objects.filter(name="make run", revoked_at__isnull=True)
    assert [key.lookup_id for key in active] == [second_key[3:15]]
    assert ApiKey.objects.filter(name="make run").count() == 2
    assert not authenticates(first_key)
    assert authenticates(second_key)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {first_key}")
    refused = client.get("/v1/plans/01JAAAAAAAAAAAAAAAAAAAAAAA")
    assert refused.status_code == 401 and refused.json()["code"] == Code.INVALID_API_KEY
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {second_key}")
    assert client.get("/v1/plans/01JAAAAAAAAAAAAAAAAAAAAAAA").json()["code"] == Code.PLAN_NOT_FOUND


@pytest.mark.django_db
def test_the_first_seed_creates_the_demo_team():
    output, key = seed()

    team = Team.objects.get(slug="default")
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(PASSWORD)
    assert list(team.staff.all()) == [admin]
    assert f"password: {PASSWORD}\n" in output
    assert sorted(
        Member.objects.filter(team=team, is_active=True).values_list("email", flat=True)
    ) == [
        "alice@acme.dev",
        "sam@acme.dev",
    ]
    agent = Agent.objects.get(team=team, name="demo-agent")
    assert policy_active_version(policy=agent.policy).number == 1
    assert api_key_authenticate(key).agent == agent


@pytest.mark.django_db
def test_a_seed_with_the_unchanged_password_prints_it():
    seed()

    output, _ = seed()

    assert f"password: {PASSWORD}\n" in output


def make_run_keys() -> list[tuple[str, bool]]:
    return [
        (key.lookup_id, key.revoked_at is None)
        for key in ApiKey.objects.filter(name="make run").order_by("created_at", "pk")
    ]


@pytest.mark.django_db
def test_the_kept_key_is_printed_again_and_stays_valid():
    _, first_key = seed()

    _, second_key = seed("--api-key", first_key)

    assert second_key == first_key
    assert make_run_keys() == [(first_key[3:15], True)]
    assert authenticates(first_key)


@pytest.mark.django_db
def test_the_kept_key_is_made_again_on_a_fresh_database():
    kept = "pg_0123456789ab_a-secret-the-developer-kept-in-local-env"

    _, printed = seed("--api-key", kept)

    assert printed == kept
    assert make_run_keys() == [("0123456789ab", True)]
    assert api_key_authenticate(kept).agent.name == "demo-agent"
    # Stored hashed, as every key: the secret is nowhere in the row.
    assert "a-secret" not in ApiKey.objects.get().secret_hash


@pytest.mark.django_db
@pytest.mark.parametrize("spoil", ["revoke", "wrong secret", "malformed"])
def test_a_kept_key_that_no_longer_works_is_replaced(spoil):
    _, kept = seed()
    if spoil == "revoke":
        ApiKey.objects.update(revoked_at=timezone.now())
    elif spoil == "wrong secret":
        kept = kept[:16] + "not-the-secret"
    else:
        kept = "pg_not-a-key"

    _, printed = seed("--api-key", kept)

    assert printed != kept
    assert authenticates(printed)
    assert not authenticates(kept)
    assert [usable for _, usable in make_run_keys()] == [False, True]
