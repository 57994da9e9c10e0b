"""The console's shadow pages: the policy page's shadow section (the version, who and when,
the last day's differences per kind, each count linking to its list), publishing in shadow
from the edit form, Promote and Withdraw, the version history's marks, and the differences'
list: read-only for everyone, team-scoped, visible to auditors."""

from __future__ import annotations

import importlib
import json
import re
from datetime import timedelta
from html import unescape

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from django.utils import timezone

from plans.models import ShadowDifference
from policies.models import Policy, PolicyVersion
from policies.selectors import policy_active_version
from policies.services import policy_set, policy_shadow_publish, policy_shadow_withdraw
from tests.conftest import POLICY

NO_MAIL = {**POLICY, "rules": [rule for rule in POLICY["rules"] if rule["tools"] != ["send_email"]]}


@pytest.fixture(autouse=True)
def shadow_view_permission(admin_groups) -> None:
    importlib.import_module("plans.migrations.0014_shadow_difference_view").grant(Group, Permission)


@pytest.fixture
def policy(policy_version) -> Policy:
    return policy_version.policy


@pytest.fixture
def shadow(policy) -> PolicyVersion:
    return policy_shadow_publish(
        policy=policy, document=NO_MAIL, comment="without mail", created_by="tessa"
    )


def difference(shadow: PolicyVersion, kind: str, *, ago: timedelta = timedelta(minutes=5), **kw):
    return ShadowDifference.objects.create(
        team=shadow.policy.team,
        shadow_version=shadow,
        active_version=policy_active_version(policy=shadow.policy),
        kind=kind,
        request=kw.pop("request", "call"),
        at=timezone.now() - ago,
        tool=kw.pop("tool", "send_email"),
        code=kw.pop("code", "allowed"),
        shadow_code=kw.pop("shadow_code", "policy_denied"),
        **kw,
    )


def policy_url(policy: Policy) -> str:
    return reverse("admin:policies_policy_change", args=[policy.pk])


def section(html: str) -> str:
    match = re.search(r'<div class="plangate-section" id="shadow">(.*?)\n</div>', html, re.S)
    assert match, "no shadow section"
    return match.group(1)


def counts(html: str) -> dict[str, tuple[int, str]]:
    """kind -> (count, link) as the section shows them."""
    cells = re.findall(r'<td data-kind="(\w+)">(?:<a href="([^"]*)">)?(\d+)', section(html), re.S)
    return {kind: (int(count), unescape(url)) for kind, url, count in cells}


def test_no_section_without_a_shadow(team_admin_client, policy):
    response = team_admin_client.get(policy_url(policy))

    assert response.status_code == 200
    assert 'id="shadow"' not in response.content.decode()


def test_the_section_counts_the_last_day_per_kind_with_links(team_admin_client, shadow):
    for _ in range(3):
        difference(shadow, "shadow_blocked")
    difference(shadow, "shadow_refused", request="declaration", code="allowed")
    difference(shadow, "shadow_blocked", ago=timedelta(days=2))  # older than a day
    # Another version's differences are not this shadow's.
    other = policy_set(team=shadow.policy.team, slug="other", document=POLICY)
    difference(policy_shadow_publish(policy=other.policy, document=NO_MAIL), "shadow_allowed")

    html = team_admin_client.get(policy_url(shadow.policy)).content.decode()

    shown = counts(html)
    assert {kind: count for kind, (count, _) in shown.items()} == {
        "shadow_refused": 1,
        "shadow_admitted": 0,
        "shadow_blocked": 3,
        "shadow_allowed": 0,
    }
    block = section(html)
    assert reverse("admin:policies_policyversion_change", args=[shadow.pk]) in block
    assert "by tessa" in block and "without mail" in block
    listed = team_admin_client.get(shown["shadow_blocked"][1])
    assert listed.status_code == 200
    rows = listed.context["cl"].result_list
    assert len(rows) == 3
    assert {(row.shadow_version_id, row.kind) for row in rows} == {(shadow.pk, "shadow_blocked")}


def test_the_counts_take_one_grouped_query(team_admin_client, shadow, django_assert_num_queries):
    from plans.admin_shadow import shadow_difference_counts

    difference(shadow, "shadow_blocked")
    difference(shadow, "shadow_allowed")
    with django_assert_num_queries(1):
        found = shadow_difference_counts(shadow_version=shadow)
    assert found["shadow_blocked"] == found["shadow_allowed"] == 1


def test_publish_in_shadow_from_the_edit_form_keeps_the_active_version(team_admin_client, policy):
    response = team_admin_client.post(
        policy_url(policy),
        {
            "description": "",
            "document": json.dumps(NO_MAIL),
            "comment": "try it",
            "publish_in_shadow": "on",
            "base_version": "1",
        },
        follow=True,
    )

    assert response.status_code == 200
    policy.refresh_from_db()
    assert policy.shadow_version is not None
    assert (policy.shadow_version.number, policy.shadow_version.shadow) == (2, True)
    assert policy_active_version(policy=policy).number == 1
    text = [str(message) for message in response.context["messages"]]
    assert any(
        "version 2 in shadow" in message and "Version 1 stays active" in message for message in text
    )


def test_the_history_marks_shadow_versions(team_admin_client, shadow):
    policy = shadow.policy
    policy_shadow_withdraw(policy=policy, by="tessa")
    tried = policy_shadow_publish(policy=policy, document={**POLICY, "default": "allow"})
    html = team_admin_client.get(policy_url(policy)).content.decode()

    history = html[html.index("plangate-table", html.index("Version history")) :]
    assert re.search(r"v2</a> <span[^>]*>shadow, withdrawn", history)
    assert re.search(rf"v{tried.number}</a> <span[^>]*>shadow, tried now", history)


def test_promote_goes_through_the_preview_then_publishes_and_clears(team_admin_client, shadow):
    policy = shadow.policy
    html = team_admin_client.get(policy_url(policy)).content.decode()
    promote = unescape(re.search(r'href="([^"]*)" id="shadow-promote"', html).group(1))

    preview = team_admin_client.get(promote)

    assert preview.status_code == 200
    page = preview.content.decode()
    assert 'id="impact-preview"' in page
    assert "as version 3, the active version" in page
    assert "default v3 (the document of v2)" in page
    assert PolicyVersion.objects.filter(policy=policy).count() == 2
    form = {
        "action": "promote_shadow",
        "_selected_action": str(shadow.pk),
        "post": "yes",
        "base_version": "1",
        "next": policy_url(policy),
    }
    done = team_admin_client.post(reverse("admin:policies_policyversion_changelist"), form)

    assert done.status_code == 302
    active = policy_active_version(policy=policy)
    assert (active.number, active.comment, active.hash) == (
        3,
        "promoted from shadow v2",
        shadow.hash,
    )
    policy.refresh_from_db()
    assert policy.shadow_version_id is None
    history = team_admin_client.get(policy_url(policy)).content.decode()
    assert "shadow, promoted as v3" in history


def test_promote_over_a_version_published_meanwhile_publishes_nothing(team_admin_client, shadow):
    policy = shadow.policy
    policy_set(team=policy.team, slug=policy.slug, document={**POLICY, "default": "allow"})
    form = {
        "action": "promote_shadow",
        "_selected_action": str(shadow.pk),
        "post": "yes",
        "base_version": "1",
    }

    response = team_admin_client.post(
        reverse("admin:policies_policyversion_changelist"), form, follow=True
    )

    text = " ".join(str(message) for message in response.context["messages"])
    assert "published meanwhile" in text
    assert policy_active_version(policy=policy).number == 3
    policy.refresh_from_db()
    assert policy.shadow_version_id == shadow.pk


def test_withdraw_clears_the_shadow(team_admin_client, shadow):
    policy = shadow.policy
    form = {"action": "withdraw_shadow", "_selected_action": str(shadow.pk), "post": "yes"}

    team_admin_client.post(reverse("admin:policies_policyversion_changelist"), form)

    policy.refresh_from_db()
    assert policy.shadow_version_id is None
    assert policy_active_version(policy=policy).number == 1


def test_an_auditor_sees_the_section_and_the_list_but_cannot_act(auditor_client, shadow):
    difference(shadow, "shadow_blocked", plan_id="01ARZ3NDEKTSV4RRFFQ69G5FAV", step=1)
    html = auditor_client.get(policy_url(shadow.policy)).content.decode()

    assert counts(html)["shadow_blocked"][0] == 1
    assert 'id="shadow-promote"' not in html and 'id="shadow-withdraw"' not in html
    assert 'name="publish_in_shadow"' not in html
    listed = auditor_client.get(reverse("admin:plans_shadowdifference_changelist"))
    assert listed.status_code == 200
    page = listed.content.decode()
    assert reverse("admin:plans_plan_change", args=["01ARZ3NDEKTSV4RRFFQ69G5FAV"]) in page
    assert "<code>allowed</code> → <code>policy_denied</code>" in page
    one = ShadowDifference.objects.get()
    change = reverse("admin:plans_shadowdifference_change", args=[one.pk])
    assert auditor_client.get(change).status_code == 200
    assert auditor_client.post(change, {"tool": "x"}).status_code == 403
    form = {"action": "withdraw_shadow", "_selected_action": str(shadow.pk), "post": "yes"}
    refused = auditor_client.post(reverse("admin:policies_policyversion_changelist"), form)
    assert refused.status_code == 403
    shadow.policy.refresh_from_db()
    assert shadow.policy.shadow_version_id == shadow.pk


def test_nobody_adds_or_changes_differences(superuser_client, shadow):
    one = difference(shadow, "shadow_refused")
    change = reverse("admin:plans_shadowdifference_change", args=[one.pk])

    assert superuser_client.get(reverse("admin:plans_shadowdifference_add")).status_code == 403
    assert superuser_client.post(change, {"tool": "x"}).status_code == 403
    one.refresh_from_db()
    assert one.tool == "send_email"


def test_the_list_is_scoped_to_the_users_teams(other_team_admin, shadow, other_team):
    from tests.admin.conftest import logged_in

    theirs = policy_set(team=other_team, slug="default", document=POLICY)
    their_shadow = policy_shadow_publish(policy=theirs.policy, document=NO_MAIL)
    difference(shadow, "shadow_blocked", tool="ours")
    difference(their_shadow, "shadow_blocked", tool="theirs")
    client = logged_in(other_team_admin)

    listed = client.get(reverse("admin:plans_shadowdifference_changelist"))

    assert [row.tool for row in listed.context["cl"].result_list] == ["theirs"]
    filters = listed.content.decode()
    assert str(their_shadow) in filters and f"shadow_version={shadow.pk}" not in filters
    # Another team's version named in the address lists nothing.
    url = reverse("admin:plans_shadowdifference_changelist") + f"?shadow_version={shadow.pk}"
    assert list(client.get(url).context["cl"].result_list) == []
    ours = ShadowDifference.objects.get(tool="ours")
    change = reverse("admin:plans_shadowdifference_change", args=[ours.pk])
    assert client.get(change).status_code in (302, 404)


def test_the_versions_list_filters_shadow_versions(auditor_client, shadow):
    url = reverse("admin:policies_policyversion_changelist") + "?shadow__exact=1"

    listed = auditor_client.get(url)

    assert [version.pk for version in listed.context["cl"].result_list] == [shadow.pk]


def test_an_edit_beside_a_shadow_is_previewed_as_the_number_after_it(team_admin_client, shadow):
    policy = shadow.policy
    document = {**POLICY, "default": "allow"}
    data = {"description": "", "document": json.dumps(document), "comment": "", "base_version": "1"}

    preview = team_admin_client.post(policy_url(policy), data)

    page = preview.content.decode()
    assert "Publish default version 3?" in page
    assert "default v3 (this change)" in page
    confirm = re.search(r'name="publish_confirmed" value="([0-9a-f]{64})"', page).group(1)
    team_admin_client.post(policy_url(policy), {**data, "publish_confirmed": confirm})
    active = policy_active_version(policy=policy)
    assert (active.number, active.document["default"]) == (3, "allow")
    policy.refresh_from_db()
    assert policy.shadow_version_id == shadow.pk


def test_the_policies_list_names_the_shadow_beside_the_active_version(team_admin_client, shadow):
    page = team_admin_client.get(reverse("admin:policies_policy_changelist")).content.decode()

    version_url = reverse("admin:policies_policyversion_change", args=[shadow.pk])
    assert re.search(rf'shadow <a href="{version_url}">v2</a>', page)
