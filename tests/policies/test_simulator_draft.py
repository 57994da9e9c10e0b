"""The simulator runs the text being edited, before it is published: the policy's edit form
(and its impact preview) posts the unsaved document to the draft's simulator, which answers
as the version it would become, writes nothing, and posts the text back to the editor."""

from __future__ import annotations

import copy
import html as html_module
import json
import re

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from audit.models import AuditRecord
from plans.models import Plan
from policies.models import PolicyVersion
from rehearsal.simulator import policy_draft, simulate_call, simulate_plan
from tests.admin.conftest import logged_in
from tests.conftest import PLAN, POLICY
from tests.policies.impact_helpers import MAIL_PLAN_STEPS, mail_plan, no_mail

MAIL_PLAN = {**PLAN, "goal": "Mail the summary", "steps": MAIL_PLAN_STEPS}


def draft_url(policy) -> str:
    return reverse("admin:policies_policy_simulate_draft", args=[policy.pk])


def change_url(policy) -> str:
    return reverse("admin:policies_policy_change", args=[policy.pk])


def edit_form(policy, document) -> dict:
    """The policy's edit form as its page posts it, with the text being edited."""
    return {
        "description": policy.description,
        "document": document if isinstance(document, str) else json.dumps(document),
        "comment": "no more e-mail",
        "base_version": policy.versions.order_by("-number").first().number,
    }


def simulate(client, policy, document, member, plan=MAIL_PLAN, tool="", args="{}"):
    return client.post(
        draft_url(policy),
        {
            **edit_form(policy, document),
            "member": member.pk,
            "plan": json.dumps(plan),
            "tool": tool,
            "args": args,
            "_simulate": "Simulate",
        },
    )


def written() -> tuple[int, int, int, int]:
    return (
        PolicyVersion.objects.count(),
        AuditRecord.objects.count(),
        LogEntry.objects.count(),
        Plan.objects.count(),
    )


def narrowed() -> dict:
    """POLICY with the GitHub rule narrowed from acme/* to acme/public-*."""
    document = copy.deepcopy(POLICY)
    document["rules"][0]["args"] = {"repo": {"glob": "acme/public-*"}}
    return document


def test_the_edit_page_offers_to_simulate_the_text_being_edited(
    team_admin_client, auditor_client, policy_version
):
    policy = policy_version.policy
    html = team_admin_client.get(change_url(policy)).content.decode()
    button = re.search(r"<button[^>]*formaction=\"([^\"]+)\"[^>]*>([^<]+)</button>", html)
    assert button, "no draft simulator button in the edit form"
    assert button[1] == draft_url(policy)
    assert "Simulate the text being edited" in button[2]
    # Auditors do not edit, so they have no draft to run.
    assert draft_url(policy) not in auditor_client.get(change_url(policy)).content.decode()


def test_the_edit_form_posted_to_the_simulator_shows_it_for_the_unsaved_text(
    team_admin_client, policy_version, member
):
    policy = policy_version.policy
    before = written()

    page = team_admin_client.post(
        draft_url(policy), {**edit_form(policy, no_mail()), "_simulate_draft": "1"}
    )

    assert page.status_code == 200
    html = page.content.decode()
    assert "Simulate default v2 (draft)" in html
    assert page.context["result"] is None and not page.context["form"].errors
    assert member.email in html
    # The draft travels in hidden fields, the diff shows it, its rules are anchored.
    assert 'type="hidden" name="document"' in html and "no mail" in html
    assert '<span class="add">+' in html and 'id="rules-4"' in html
    assert written() == before


def test_a_plan_is_answered_under_the_draft_not_the_published_version(
    team_admin_client, policy_version, member
):
    policy = policy_version.policy
    before = written()

    page = simulate(team_admin_client, policy, no_mail(), member)

    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="plan-decision">policy_denied<' in html
    assert "step 2 <code>send_email</code>" in html and 'href="#rules-4"' in html
    answer = json.loads(page.context["result_json"])
    expected = simulate_plan(
        version=policy_draft(policy=policy, document=no_mail()), member=member, document=MAIL_PLAN
    )
    assert answer == expected.as_json()
    assert (answer["version"], answer["draft"]) == (2, True)
    # The published version still allows it: the answer is the draft's.
    published = simulate_plan(version=policy_version, member=member, document=MAIL_PLAN)
    assert published.allowed
    assert written() == before
    assert list(policy.versions.values_list("number", flat=True)) == [1]


def test_a_call_is_answered_by_the_guard_under_the_draft(team_admin_client, policy_version, member):
    policy = policy_version.policy
    # The step leaves the repository to the agent: the call decides.
    plan = {**PLAN, "steps": [{"tool": "github_list_issues"}]}
    before = written()

    page = simulate(
        team_admin_client,
        policy,
        narrowed(),
        member,
        plan=plan,
        tool="github_list_issues",
        args='{"repo": "acme/app"}',
    )

    html = page.content.decode()
    assert 'id="call-decision">policy_denied<' in html
    expected = simulate_call(
        version=policy_draft(policy=policy, document=narrowed()),
        member=member,
        document=plan,
        tool="github_list_issues",
        args={"repo": "acme/app"},
    )
    assert json.loads(page.context["result_json"]) == expected.as_json()
    # Under the published version (acme/*) the same call is allowed.
    assert simulate_call(
        version=policy_version,
        member=member,
        document=plan,
        tool="github_list_issues",
        args={"repo": "acme/app"},
    ).allowed
    assert written() == before


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ('{"version": 1,\n "default": deny}', "Not valid JSON: Expecting value (line 2"),
        ({**POLICY, "default": "maybe"}, "default: "),
        (
            {**POLICY, "rules": [{"effect": "permit", "tools": ["x"]}]},
            "rules[0].effect: ",
        ),
    ],
)
def test_a_draft_that_could_not_be_published_is_named_with_its_path_and_writes_nothing(
    team_admin_client, policy_version, member, document, message
):
    policy = policy_version.policy
    before = written()

    page = simulate(team_admin_client, policy, document, member)

    assert page.status_code == 200
    html = page.content.decode().replace("&#x27;", "'").replace("&quot;", '"')
    assert 'id="draft-errors"' in html and message in html
    assert page.context.get("result") is None
    assert 'id="draft-edit"' in html  # back to editing, with the text
    assert written() == before


def test_back_to_editing_posts_the_draft_back_to_the_editor_unpublished(
    team_admin_client, policy_version, member
):
    policy = policy_version.policy
    page = simulate(team_admin_client, policy, no_mail(), member)
    carried = dict(
        re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.content.decode())
    )
    carried.pop("csrfmiddlewaretoken")
    assert set(carried) == {"description", "document", "comment", "base_version"}

    back = team_admin_client.post(
        change_url(policy),
        {name: html_module.unescape(value) for name, value in carried.items()}
        | {"_edit_again": "1"},
    )

    assert back.status_code == 200
    form = back.context["adminform"].form
    assert json.loads(form["document"].value()) == no_mail()
    assert form["comment"].value() == "no more e-mail"
    assert list(policy.versions.values_list("number", flat=True)) == [1]


def test_the_impact_preview_offers_to_simulate_the_version_it_previews(
    team_admin_client, agent, member
):
    policy = agent.agent.policy
    mail_plan(agent)
    preview = team_admin_client.post(change_url(policy), edit_form(policy, no_mail()))
    html = preview.content.decode()
    assert 'id="impact-simulate"' in html and f'formaction="{draft_url(policy)}"' in html
    carried = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', html))

    fields = {name: html_module.unescape(value) for name, value in carried.items()}
    page = team_admin_client.post(draft_url(policy), {**fields, "_simulate_draft": "1"})

    assert page.status_code == 200
    assert (
        page.context["draft"].document == policy_draft(policy=policy, document=no_mail()).document
    )
    assert policy.versions.count() == 1


def test_another_teams_admin_cannot_simulate_the_teams_draft(
    other_team_admin, policy_version, member
):
    policy = policy_version.policy
    response = simulate(logged_in(other_team_admin), policy, no_mail(), member)
    assert response.status_code in (302, 404)
    assert member.email not in response.content.decode()


def test_a_get_without_a_draft_goes_back_to_the_editor(team_admin_client, policy_version):
    policy = policy_version.policy
    response = team_admin_client.get(draft_url(policy))
    assert response.status_code == 302 and response["Location"] == change_url(policy)
