"""Rollback: an old version published again becomes version n+1 with the same document,
through the publish service (validated, recorded); only those who edit policies see it."""

from __future__ import annotations

from django.urls import reverse

from audit.models import AuditRecord
from policies.models import PolicyVersion
from policies.services import policy_set, policy_version_republish
from rehearsal.impact import policy_impact
from tests.admin.conftest import logged_in
from tests.conftest import POLICY
from tests.policies.impact_helpers import mail_plan, no_mail

LABEL = "Publish this version again"


def two_versions(team) -> tuple[PolicyVersion, PolicyVersion]:
    first = policy_set(team=team, slug="default", document=POLICY)
    return first, policy_set(team=team, slug="default", document=no_mail(), comment="no mail")


def action_url(version: PolicyVersion) -> str:
    return reverse("admin:policies_policyversion_publish_again", args=[version.pk])


def version_url(version: PolicyVersion) -> str:
    return reverse("admin:policies_policyversion_change", args=[version.pk])


def confirm(client, version: PolicyVersion, comment: str = ""):
    return client.post(
        reverse("admin:policies_policyversion_changelist"),
        {
            "action": "publish_again",
            "_selected_action": [version.pk],
            "post": "yes",
            "comment": comment,
        },
    )


def test_republishing_makes_version_n_plus_1_with_the_same_document_and_a_record(team):
    first, _second = two_versions(team)

    third = policy_version_republish(version=first, comment="mail is back", created_by="tessa")

    assert third.number == 3
    assert (third.hash, third.document) == (first.hash, first.document)
    assert third.comment == "Republished version 1: mail is back"
    assert third.created_by == "tessa"
    record = AuditRecord.objects.filter(team=team, policy="default", policy_version=3).get()
    assert record.details["changes"] == {"version": [2, 3]}
    assert record.details["comment"] == "Republished version 1: mail is back"
    assert record.details["hash"] == first.hash


def test_republishing_the_active_document_publishes_nothing(team):
    first, second = two_versions(team)
    records = AuditRecord.objects.count()
    assert policy_version_republish(version=second) == second
    third = policy_version_republish(version=first)
    assert policy_version_republish(version=first) == third
    assert PolicyVersion.objects.filter(policy=first.policy).count() == 3
    assert AuditRecord.objects.count() == records + 1


def test_a_team_admin_publishes_an_old_version_again_from_its_page(
    team_admin_client, team_admin, team, agent
):
    policy = agent.agent.policy
    second = policy_set(team=team, slug="default", document=no_mail(), comment="no mail")
    first = policy.versions.get(number=1)

    page = team_admin_client.get(version_url(first)).content.decode()
    assert LABEL in page and action_url(first) in page
    assert LABEL not in team_admin_client.get(version_url(second)).content.decode()

    asked = team_admin_client.get(action_url(first))
    assert asked.status_code == 200
    assert "Publish default version 1 again" in asked.content.decode()
    assert policy.versions.count() == 2  # asking writes nothing

    done = confirm(team_admin_client, first, "rollback of the mail ban")

    third = policy.versions.get(number=3)
    assert done.status_code == 302 and done["Location"] == version_url(third)
    assert third.hash == first.hash
    assert third.comment == "Republished version 1: rollback of the mail ban"
    assert third.created_by == team_admin.username


def test_the_confirmation_shows_the_edit_previews_plans_and_diff(team_admin_client, team, agent):
    policy = agent.agent.policy
    policy_set(team=team, slug="default", document={**POLICY, "default": "allow"})
    strict = policy_set(team=team, slug="default", document=no_mail())
    policy_set(team=team, slug="default", document=POLICY)
    mailing = mail_plan(agent)
    expected = policy_impact(policy=policy, document=strict.document)

    asked = team_admin_client.get(action_url(strict))

    html = " ".join(asked.content.decode().split())
    # The edit preview's own part of the page, from the same computation.
    assert asked.context["impact"] == expected
    assert "1 of 1 live plan would be refused (<code>policy_denied</code>)" in html
    assert 'id="impact-plans"' in html and mailing.pk in html
    assert reverse("admin:plans_plan_change", args=[mailing.pk]) in html
    assert "step 2 <code>send_email</code>: deny rule &quot;no mail&quot;" in html
    assert "(rules[4])" in html and "alice@acme.dev" in html and "engineer" in html
    # The diff from the active version (v4, equal to v1) to the old document.
    assert "Changes from version 4" in html
    assert "default v4 (active)" in html and "default v5 (the document of v3)" in html
    assert '<span class="add">+' in html and "no mail" in html
    assert policy.versions.count() == 4


def test_an_old_document_no_longer_valid_is_said_so_before_publishing(
    team_admin_client, team, agent
):
    policy = agent.agent.policy
    old = policy.versions.get(number=1)
    PolicyVersion.objects.filter(pk=old.pk).update(document={**POLICY, "default": "maybe"})
    policy_set(team=team, slug="default", document=no_mail())

    asked = team_admin_client.get(action_url(old)).content.decode()

    assert "no longer valid: publishing it will be refused" in asked
    assert 'id="impact-plans"' not in asked
    assert policy.versions.count() == 2


def test_an_auditor_sees_no_control_and_is_refused(auditor_client, team, agent):
    first, _second = two_versions(team)
    page = auditor_client.get(version_url(first))
    assert page.status_code == 200
    assert LABEL not in page.content.decode()
    assert auditor_client.get(action_url(first)).status_code == 403
    assert confirm(auditor_client, first).status_code == 403
    assert first.policy.versions.count() == 2


def test_another_teams_admin_cannot_republish(team, other_team_admin):
    first, _second = two_versions(team)
    client = logged_in(other_team_admin)
    assert client.get(action_url(first)).status_code == 404
    confirm(client, first)
    assert first.policy.versions.count() == 2
