"""Editing a policy in the admin publishes version n+1 through the same service as
`set_policy`; an invalid document is refused on the form, naming the path, writing nothing."""

from __future__ import annotations

import copy
import json
import re

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.urls import reverse

from policies.models import Policy, PolicyVersion
from policies.services import policy_set
from tests.conftest import POLICY


def edit(client, policy, document, **extra):
    """Save the form; a change shown with its impact first is then published, as the
    page's "Publish" button does (tests/policies/test_impact_admin.py tests that page)."""
    data = {
        "description": policy.description,
        "document": document if isinstance(document, str) else json.dumps(document),
        "comment": "",
        "base_version": policy.versions.order_by("-number").first().number,
        **extra,
    }
    url = reverse("admin:policies_policy_change", args=[policy.pk])
    response = client.post(url, data)
    confirm = re.search(
        r'name="publish_confirmed" value="([0-9a-f]{64})"', response.content.decode()
    )
    if response.status_code == 200 and confirm:
        response = client.post(url, {**data, "publish_confirmed": confirm[1]})
    return response


def tightened() -> dict:
    document = copy.deepcopy(POLICY)
    document["rules"].append({"effect": "deny", "tools": ["send_email"], "name": "no mail"})
    return document


def test_the_form_shows_the_current_document_version_and_agents(team_admin_client, agent):
    policy = agent.agent.policy
    page = team_admin_client.get(reverse("admin:policies_policy_change", args=[policy.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "github_delete_*" in html
    assert ">v1<" in html
    assert agent.agent.name in html


def test_saving_publishes_the_next_version_with_its_comment(team_admin_client, team_admin, agent):
    policy = agent.agent.policy

    response = edit(team_admin_client, policy, tightened(), comment="no more e-mail")

    assert response.status_code == 302, response.content.decode()
    latest = policy.versions.order_by("-number").first()
    assert latest.number == 2
    assert latest.comment == "no more e-mail"
    assert latest.created_by == team_admin.username
    assert latest.document["rules"][-1]["tools"] == ["send_email"]
    assert policy.versions.get(number=1).document == POLICY
    entry = LogEntry.objects.get(user=team_admin, action_flag=CHANGE, object_id=str(policy.pk))
    assert entry.get_change_message() == "Published version 2: no more e-mail."


def test_an_invalid_document_is_refused_with_its_path_and_nothing_is_written(
    team_admin_client, agent
):
    policy = agent.agent.policy
    document = copy.deepcopy(POLICY)
    document["rules"][0]["effect"] = "permit"
    document["rules"][1]["args"] = {"repo": {"regx": "acme/.*"}}
    versions, entries = PolicyVersion.objects.count(), LogEntry.objects.count()

    response = edit(team_admin_client, policy, document, comment="oops")

    assert response.status_code == 200
    html = response.content.decode()
    assert "rules[0].effect" in html
    assert "rules[1].args.repo.regx" in html
    assert "permit" in html  # the text typed is kept in the form for fixing
    assert PolicyVersion.objects.count() == versions
    assert LogEntry.objects.count() == entries


def test_text_that_is_not_json_is_refused_with_its_position(team_admin_client, agent):
    policy = agent.agent.policy
    versions = PolicyVersion.objects.count()
    response = edit(team_admin_client, policy, '{"version": 1,\n "default": deny}')
    assert response.status_code == 200
    assert "Not valid JSON" in response.content.decode()
    assert "line 2" in response.content.decode()
    assert PolicyVersion.objects.count() == versions


def test_saving_the_same_document_publishes_nothing(team_admin_client, agent):
    policy = agent.agent.policy
    response = edit(team_admin_client, policy, POLICY)
    assert response.status_code == 302
    assert policy.versions.count() == 1
    page = team_admin_client.get(response["Location"]).content.decode()
    assert "no version was published" in page
    assert "was changed successfully" not in page


def test_adding_a_policy_publishes_version_one(team_admin_client, team_admin, team, db):
    response = team_admin_client.post(
        reverse("admin:policies_policy_add"),
        {
            "team": team.pk,
            "slug": "readonly",
            "description": "read only",
            "document": json.dumps(POLICY),
            "comment": "first",
        },
    )
    assert response.status_code == 302, response.content.decode()
    policy = Policy.objects.get(team=team, slug="readonly")
    assert list(policy.versions.values_list("number", "comment")) == [(1, "first")]
    assert LogEntry.objects.filter(
        user=team_admin, action_flag=ADDITION, object_id=str(policy.pk)
    ).exists()


def test_the_version_page_shows_a_readable_diff_and_is_read_only(team_admin_client, team):
    policy_set(team=team, slug="default", document=POLICY)
    newer = policy_set(team=team, slug="default", document=tightened(), comment="c")
    url = reverse("admin:policies_policyversion_change", args=[newer.pk])

    page = team_admin_client.get(url)

    html = page.content.decode()
    assert page.status_code == 200
    assert "default v1" in html and "default v2" in html
    assert '<span class="add">+' in html
    assert "send_email" in html
    assert 'name="_save"' not in html
    assert team_admin_client.post(url, {"comment": "rewritten"}).status_code == 403
    newer.refresh_from_db()
    assert newer.comment == "c"


def test_policies_cannot_be_deleted_in_the_admin(superuser_client, agent):
    policy = agent.agent.policy
    url = reverse("admin:policies_policy_delete", args=[policy.pk])
    assert superuser_client.post(url, {"post": "yes"}).status_code == 403


def test_a_version_published_meanwhile_is_not_silently_overwritten(team_admin_client, agent, team):
    policy = agent.agent.policy
    page = team_admin_client.get(reverse("admin:policies_policy_change", args=[policy.pk]))
    assert 'name="base_version" value="1"' in page.content.decode()
    policy_set(team=team, slug="default", document={**POLICY, "default": "allow"}, created_by="cli")

    stale = edit(team_admin_client, policy, tightened(), base_version=1)

    assert stale.status_code == 200
    html = stale.content.decode()
    assert "Version 2 was published by cli while you were editing" in html
    assert 'name="base_version" value="2"' in html
    assert policy.versions.count() == 2

    again = edit(team_admin_client, policy, tightened(), base_version=2)
    assert again.status_code == 302
    assert policy.versions.order_by("-number").first().number == 3


def test_only_the_newest_version_page_says_it_is_the_active_one(team_admin_client, team):
    first = policy_set(team=team, slug="default", document=POLICY)
    newer = policy_set(team=team, slug="default", document=tightened())

    def page(version) -> str:
        url = reverse("admin:policies_policyversion_change", args=[version.pk])
        return team_admin_client.get(url).content.decode()

    assert "this is the active version" in page(newer)
    assert "this is the active version" not in page(first)
