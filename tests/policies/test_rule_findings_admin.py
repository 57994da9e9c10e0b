"""The edit preview, the rollback confirmation and the draft's simulator name the rules that
never take effect (guard.policy_findings): an allow rule a deny rule shadows for every
member, a review rule that never asks anyone. Naming them writes nothing."""

from __future__ import annotations

import copy
import json

from django.contrib.admin.models import LogEntry
from django.urls import reverse

from audit.models import AuditRecord
from policies.models import PolicyVersion
from policies.references import policy_rule_findings
from policies.services import policy_set
from tests.conftest import POLICY
from tests.policies.impact_helpers import no_mail


def change_url(policy) -> str:
    return reverse("admin:policies_policy_change", args=[policy.pk])


def form_data(policy, document) -> dict:
    return {
        "description": policy.description,
        "document": json.dumps(document),
        "comment": "",
        "base_version": policy.versions.order_by("-number").first().number,
    }


def with_reviews() -> dict:
    """POLICY with two review rules that never ask anyone: rules[4] behind the deny rule
    on github_delete_* (rules[1]), rules[5] for a role the team does not have."""
    document = copy.deepcopy(POLICY)
    document["rules"] += [
        {"effect": "review", "tools": ["github_delete_repo"], "name": "deletes need a person"},
        {"effect": "review", "tools": ["deploy"], "roles": ["release-manager"]},
    ]
    return document


def text(response) -> str:
    return " ".join(response.content.decode().replace("&quot;", '"').split())


def written() -> tuple[int, int, int]:
    return PolicyVersion.objects.count(), AuditRecord.objects.count(), LogEntry.objects.count()


def test_the_edit_preview_names_an_allow_rule_a_deny_rule_shadows(team_admin_client, agent):
    policy = agent.agent.policy
    before = written()

    page = team_admin_client.post(change_url(policy), form_data(policy, no_mail()))

    html = text(page)
    assert 'id="rule-findings"' in html
    assert (
        "<code>rules[2]</code>: allow rule (rules[2]) never admits a call:"
        ' deny rule "no mail" (rules[4]) forbids every tool it names (send_email)'
    ) in html
    assert "<code>allow_shadowed</code>" in html
    assert [f.rule for f in page.context["rule_findings"]] == [2]
    assert written() == before


def test_the_edit_preview_names_review_rules_that_never_ask_anyone(team_admin_client, agent):
    policy = agent.agent.policy
    before = written()

    page = team_admin_client.post(change_url(policy), form_data(policy, with_reviews()))

    html = text(page)
    assert "2 rules in this version never take effect" in html
    assert (
        '<code>rules[4]</code>: review rule "deletes need a person" (rules[4]) never asks'
        " anyone: deny rule (rules[1]) refuses every step of github_delete_repo at issuance"
    ) in html
    assert (
        "<code>rules[5]</code>: review rule (rules[5]) never asks anyone: it names no role the"
        ' team has ("release-manager"), so it applies to no member'
    ) in html
    assert html.count("<code>review_never_applies</code>") == 2
    assert written() == before


def test_a_review_rule_for_a_role_the_team_has_is_no_finding(team, member):
    document = with_reviews()
    document["rules"][5]["roles"] = ["engineer"]  # alice's role
    validated = policy_set(team=team, slug="default", document=document).document
    assert [f.rule for f in policy_rule_findings(team=team, document=validated)] == [4]


def test_a_preview_without_such_rules_shows_none(team_admin_client, agent):
    policy = agent.agent.policy
    document = {**POLICY, "default": "allow"}
    page = team_admin_client.post(change_url(policy), form_data(policy, document))
    assert page.status_code == 200 and "Publish default version 2?" in text(page)
    assert 'id="rule-findings"' not in text(page)


def test_the_rollback_confirmation_names_them_too(team_admin_client, team, agent):
    old = policy_set(team=team, slug="default", document=with_reviews())
    policy_set(team=team, slug="default", document=POLICY)
    before = written()

    asked = team_admin_client.get(
        reverse("admin:policies_policyversion_publish_again", args=[old.pk])
    )

    html = text(asked)
    assert 'id="rule-findings"' in html
    assert [f.rule for f in asked.context["rule_findings"]] == [4, 5]
    assert "it names no role the team has" in html
    assert written() == before


def test_the_drafts_simulator_names_them(team_admin_client, agent):
    policy = agent.agent.policy
    page = team_admin_client.post(
        reverse("admin:policies_policy_simulate_draft", args=[policy.pk]),
        {**form_data(policy, no_mail()), "_simulate_draft": "1"},
    )
    html = text(page)
    assert 'id="rule-findings"' in html and '<a href="#rules-2"><code>rules[2]</code></a>' in html
