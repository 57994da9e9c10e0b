"""Saving a changed policy in the admin shows its impact on live plans first; "Publish"
publishes it through the service (with its "published meanwhile" check); nothing is written
before."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from audit.models import AuditRecord
from policies.models import PolicyVersion
from policies.services import policy_set
from tests.admin.conftest import logged_in
from tests.conftest import POLICY
from tests.policies.impact_helpers import issue, mail_plan, no_mail


def form_data(policy, document, **extra) -> dict:
    return {
        "description": policy.description,
        "document": json.dumps(document),
        "comment": "no more e-mail",
        "base_version": policy.versions.order_by("-number").first().number,
        **extra,
    }


def change_url(policy) -> str:
    return reverse("admin:policies_policy_change", args=[policy.pk])


def confirm_hash(html: str) -> str:
    found = re.search(r'name="publish_confirmed" value="([0-9a-f]{64})"', html)
    assert found, "no Publish form on the page"
    return found[1]


def written() -> tuple[int, int, int]:
    return PolicyVersion.objects.count(), AuditRecord.objects.count(), LogEntry.objects.count()


@pytest.fixture
def live(agent, other_agent):
    """The team's mailing plan, a plan the change leaves alone, another team's mailing plan."""
    return {
        "mailing": mail_plan(agent),
        "summary": issue(agent),
        "foreign": mail_plan(other_agent, user="olga@globex.test"),
    }


def test_saving_a_change_shows_the_plans_and_steps_it_would_refuse_and_writes_nothing(
    team_admin_client, agent, live
):
    policy = agent.agent.policy
    before = written()

    page = team_admin_client.post(change_url(policy), form_data(policy, no_mail()))

    assert page.status_code == 200
    html = page.content.decode()
    assert "Publish default version 2?" in html
    assert "1 of 2 live plans" in html
    assert live["mailing"].pk in html
    assert live["summary"].pk not in html
    assert live["foreign"].pk not in html and "olga@globex.test" not in html
    assert "step 2 <code>send_email</code>" in html and "rules[4]" in html
    assert "summariser" in html and "alice@acme.dev" in html and "engineer" in html
    assert written() == before
    policy.refresh_from_db()
    assert policy.versions.count() == 1


def test_publish_after_the_preview_creates_exactly_one_version(
    team_admin_client, team_admin, agent, live
):
    policy = agent.agent.policy
    data = form_data(policy, no_mail())
    preview = team_admin_client.post(change_url(policy), data)

    published = team_admin_client.post(
        change_url(policy), {**data, "publish_confirmed": confirm_hash(preview.content.decode())}
    )

    assert published.status_code == 302
    assert list(policy.versions.values_list("number", "comment", "created_by")) == [
        (2, "no more e-mail", team_admin.username),
        (1, "", ""),
    ]
    record = AuditRecord.objects.filter(team=policy.team, policy="default").last()
    assert record.policy_version == 2 and record.actor == team_admin.username


def test_a_version_published_between_preview_and_publish_is_not_overwritten(
    team_admin_client, agent, team, live
):
    policy = agent.agent.policy
    data = form_data(policy, no_mail())
    preview = team_admin_client.post(change_url(policy), data)
    policy_set(team=team, slug="default", document={**POLICY, "default": "allow"}, created_by="ci")

    refused = team_admin_client.post(
        change_url(policy), {**data, "publish_confirmed": confirm_hash(preview.content.decode())}
    )

    assert refused.status_code == 200
    assert "Version 2 was published by ci while you were editing" in refused.content.decode()
    assert policy.versions.count() == 2


def test_a_document_edited_after_the_preview_is_previewed_again(team_admin_client, agent, live):
    policy = agent.agent.policy
    preview = team_admin_client.post(
        change_url(policy), form_data(policy, POLICY | {"default": "allow"})
    )
    other_text = form_data(
        policy, no_mail(), publish_confirmed=confirm_hash(preview.content.decode())
    )

    again = team_admin_client.post(change_url(policy), other_text)

    assert again.status_code == 200
    assert live["mailing"].pk in again.content.decode()
    assert policy.versions.count() == 1


def test_an_unchanged_document_or_an_invalid_one_is_not_previewed(team_admin_client, agent):
    policy = agent.agent.policy
    unchanged = team_admin_client.post(change_url(policy), form_data(policy, POLICY))
    assert unchanged.status_code == 302
    broken = no_mail()
    broken["rules"][4]["effect"] = "forbid"
    invalid = team_admin_client.post(change_url(policy), form_data(policy, broken))
    assert invalid.status_code == 200
    assert "rules[4].effect" in invalid.content.decode()
    assert "publish_confirmed" not in invalid.content.decode()
    assert policy.versions.count() == 1


def test_another_teams_admin_cannot_preview_the_policy(other_team_admin, agent, live):
    policy = agent.agent.policy
    response = logged_in(other_team_admin).post(change_url(policy), form_data(policy, no_mail()))
    assert response.status_code in (302, 404)
    assert live["mailing"].pk not in response.content.decode()
    assert policy.versions.count() == 1


def test_back_to_editing_shows_the_form_with_the_text_and_publishes_nothing(
    team_admin_client, agent, live
):
    policy = agent.agent.policy
    data = form_data(policy, no_mail())
    preview = team_admin_client.post(change_url(policy), data)
    back = {**data, "publish_confirmed": confirm_hash(preview.content.decode()), "_edit_again": "1"}

    page = team_admin_client.post(change_url(policy), back)

    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="impact-confirm"' not in html
    assert "Your text is kept below" in html
    assert "no mail" in page.context["adminform"].form["document"].value()
    assert policy.versions.count() == 1
