"""An auditor's pages: one timeline per plan, decisions that name their plan, policy version
and rule, lists that filter the way an auditor asks, and no control an auditor cannot use.
Every page sees its own team only and costs a bounded number of queries."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditRecord
from audit.services import record_append
from guard.decisions import Decision
from kernel.problems import Code
from members.services import api_key_create, api_key_revoke
from plans.admin_timeline import HEAD, TAIL
from plans.models import Plan, PlanDisplayUpdate, PlanEvent
from plans.services import plan_issue, plan_refresh
from policies.services import policy_set
from tests.admin.test_list_queries import grow, queries_for
from tests.conftest import POLICY, make_agent, plan_document
from tests.plans.decision_rows import decision_create, decisions_bulk_create


def page(client, url: str, query: dict | None = None) -> str:
    response = client.get(url, query or {})
    assert response.status_code == 200, response.status_code
    return response.content.decode()


# --- no control an auditor cannot use -----------------------------------------------------


def test_an_auditor_sees_no_revoke_link_for_api_keys_and_an_admin_does(
    auditor_client, team_admin_client, agent
):
    url = reverse("admin:members_agent_change", args=[agent.agent.pk])
    revoke_url = reverse(
        "admin:members_apikey_revoke_api_keys", args=[agent.agent.api_keys.get().pk]
    )

    as_auditor = page(auditor_client, url)
    as_admin = page(team_admin_client, url)

    assert agent.agent.api_keys.get().prefix in as_auditor  # the key is listed, for both
    assert "Revoke…" not in as_auditor and revoke_url not in as_auditor
    assert "Revoke…" in as_admin and revoke_url in as_admin
    # and the link would only have answered 403
    assert auditor_client.get(revoke_url).status_code == 403


def test_an_auditor_sees_no_object_action_on_plan_or_key_pages(
    auditor_client, team_admin_client, plan, agent
):
    plan_url = reverse("admin:plans_plan_change", args=[plan.pk])
    key = agent.agent.api_keys.get()
    key_url = reverse("admin:members_apikey_change", args=[key.pk])

    assert "Revoke plan" not in page(auditor_client, plan_url)
    assert "Revoke this key" not in page(auditor_client, key_url)
    assert "Revoke plan" in page(team_admin_client, plan_url)
    assert "Revoke this key" in page(team_admin_client, key_url)


def test_a_revoked_key_has_no_revoke_link_even_for_an_admin(team_admin_client, agent):
    key, _ = api_key_create(agent=agent.agent)
    api_key_revoke(api_key=key)
    html = page(team_admin_client, reverse("admin:members_apikey_change", args=[key.pk]))
    assert "Revoke this key" not in html


# --- helpers ------------------------------------------------------------------------------


def timeline_page(client, plan) -> str:
    return page(client, reverse("admin:plans_plan_timeline", args=[plan.pk]))


def timeline_kinds(html: str) -> list[str]:
    return re.findall(r'data-kind="([a-z_]+)"', html)


def timeline_times(html: str) -> list[str]:
    """The times as shown, to the second."""
    return re.findall(r"<time datetime=\"[^\"]+\">([^<]+)</time>", html)


def decide(plan, at, tool="github_list_issues", decision=Decision.ALLOWED, step=0, **more):
    return decision_create(
        plan=plan, occurred_at=at, tool=tool, decision=decision, step=step, **more
    )


def items_update(*statuses: str) -> dict:
    entries = [
        {"content": f"entry {index}", "priority": "medium", "status": status}
        for index, status in enumerate(statuses)
    ]
    return {
        "sessionId": "s1",
        "update": {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": "p", "entries": entries},
        },
    }


def exported(client, name: str, query: dict | None = None) -> str:
    response = client.get(reverse(name), query or {})
    assert response.status_code == 200, response.status_code
    return b"".join(response.streaming_content).decode()


# --- one timeline per plan ----------------------------------------------------------------


def test_the_timeline_holds_everything_in_time_order_to_the_second(auditor_client, agent, issued):
    plan = issued.plan
    refreshed = plan_refresh(agent=agent.agent, plan_id=plan.pk, token=issued.token)
    start = refreshed.issued_at + timedelta(seconds=1)
    decide(plan, start, step=0)
    PlanDisplayUpdate.objects.create(
        plan=plan, occurred_at=start + timedelta(seconds=1), message=items_update("in_progress")
    )
    decide(
        plan,
        start + timedelta(seconds=2),
        tool="github_delete_repo",
        decision=Decision.NOT_IN_PLAN,
        step=None,
        reason="no step of the plan calls github_delete_repo",
    )
    PlanDisplayUpdate.objects.create(
        plan=plan,
        occurred_at=start + timedelta(seconds=3),
        message=items_update("completed", "pending"),
    )
    record_append(
        team=plan.team,
        kind=AuditRecord.Kind.REFRESH_REFUSED,
        at=start + timedelta(seconds=4),
        plan_id=plan.pk,
        code=Code.USER_DISABLED,
    )
    Plan.objects.filter(pk=plan.pk).update(
        status=Plan.Status.REVOKED,
        revoked_at=start + timedelta(seconds=5),
        revoked_by="tessa",
        revoke_reason="the member left",
    )
    plan.refresh_from_db()

    html = timeline_page(auditor_client, plan)

    assert timeline_kinds(html) == [
        "issued",
        "token",
        "token",
        "decision",
        "display",
        "decision",
        "display",
        "refresh_refused",
        "revoked",
    ]
    times = timeline_times(html)
    assert times == sorted(times)
    shown = timezone.localtime(start + timedelta(seconds=2)).strftime("%Y-%m-%d %H:%M:%S")
    assert shown in html  # to the second
    assert "token refreshed" in html
    assert plan.tokens.get(kind="refresh").kid[:12] in html
    assert "step 1" in html  # the stored index 0, counted from 1 as people count
    assert "no step of the plan calls github_delete_repo" in html
    assert "1 entry: 1 in progress" in html and "2 entries: 1 completed, 1 pending" in html
    assert Code.USER_DISABLED in html
    assert "by tessa" in html and "the member left" in html


def test_one_blocked_call_has_one_step_number_on_every_page(auditor_client, plan):
    event = decide(
        plan,
        plan.created_at + timedelta(seconds=1),
        tool="github_get_issue",
        decision=Decision.NOT_IN_PLAN,
        step=1,
        reason="the arguments match no step for github_get_issue (step 2: repo must ...)",
    )
    plan_html = page(auditor_client, reverse("admin:plans_plan_change", args=[plan.pk]))
    blocked = plan_html.split('id="blocked"', 1)[1].split("</table>", 1)[0]
    listed = page(auditor_client, reverse("admin:plans_planevent_changelist"), {"q": plan.pk})
    own = page(auditor_client, reverse("admin:plans_planevent_change", args=[event.pk]))
    timeline = timeline_page(auditor_client, plan)

    assert "<td>2</td>" in blocked and "<td>1</td>" not in blocked
    assert "step 2" in listed and "step 1" not in listed
    assert "step 2: <code>github_get_issue</code>" in own
    assert "step 2" in timeline and "step 1" not in timeline


def test_the_plan_page_says_who_revoked_it_and_why(auditor_client, plan):
    Plan.objects.filter(pk=plan.pk).update(
        status=Plan.Status.REVOKED,
        revoked_at=timezone.now(),
        revoked_by="tessa",
        revoke_reason="the member left",
    )
    html = page(auditor_client, reverse("admin:plans_plan_change", args=[plan.pk]))
    assert "Revoked by" in html and "tessa" in html and "the member left" in html


def test_an_ended_plan_shows_its_end_and_the_decisions_that_were_not_delivered(
    auditor_client, plan
):
    ended_at = plan.created_at + timedelta(minutes=5)
    Plan.objects.filter(pk=plan.pk).update(
        status=Plan.Status.TOKEN_REFUSED,
        ended_at=ended_at,
        end_reason="wrong issuer",
        decisions_lost=983,
    )
    plan.refresh_from_db()

    timeline = timeline_page(auditor_client, plan)
    plan_html = page(auditor_client, reverse("admin:plans_plan_change", args=[plan.pk]))

    assert timeline_kinds(timeline)[-1] == "ended"
    assert "token refused by the guard" in timeline and "wrong issuer" in timeline
    for html in (timeline, plan_html):
        assert "983 decisions were not delivered" in html
    assert "wrong issuer" in plan_html
    timeline_url = reverse("admin:plans_plan_timeline", args=[plan.pk])
    assert f'href="{timeline_url}"' in plan_html


def test_a_plan_with_20000_decisions_shows_the_first_and_last_and_links_the_rest(
    auditor_client, agent
):
    small = plan_issue(agent=agent.agent, document=plan_document()).plan
    big = plan_issue(agent=agent.agent, document=plan_document()).plan
    start = big.created_at + timedelta(seconds=1)
    for plan, count in ((small, 300), (big, 20_000)):
        decisions_bulk_create(
            (
                PlanEvent(
                    plan=plan,
                    occurred_at=start + timedelta(milliseconds=index),
                    tool="github_list_issues",
                    decision=Decision.ALLOWED,
                    step=0,
                )
                for index in range(count)
            ),
            batch_size=2000,
        )

    small_queries = queries_for(
        auditor_client, reverse("admin:plans_plan_timeline", args=[small.pk])
    )
    big_queries = queries_for(auditor_client, reverse("admin:plans_plan_timeline", args=[big.pk]))
    html = timeline_page(auditor_client, big)

    assert big_queries == small_queries
    assert len(timeline_kinds(html)) == HEAD + TAIL
    assert timeline_kinds(html)[:3] == ["issued", "token", "decision"]
    hidden = 20_000 + 2 - HEAD - TAIL
    assert f"{hidden} more entries are not shown" in html
    events = list(PlanEvent.objects.filter(plan=big).order_by("occurred_at", "id"))
    first_hidden, last_hidden = events[HEAD - 2], events[-TAIL - 1]
    link = re.search(r'<a href="([^"]+)">decisions list, filtered', html)
    assert link is not None
    listed = page(auditor_client, link.group(1).replace("&amp;", "&"))
    change = lambda event: reverse("admin:plans_planevent_change", args=[event.pk])  # noqa: E731
    assert change(last_hidden) in listed  # the newest hidden decision heads the list
    assert change(events[-1]) not in listed and change(events[0]) not in listed
    assert change(first_hidden) not in listed  # page 1 holds the newest 100 of the span


# --- decisions: filters, columns, one numbering, one page that answers ----------------------


def test_decisions_filter_by_agent_member_tool_decision_and_policy_version(
    auditor_client, team, agent, issued, sre_member
):
    plan = issued.plan
    v2 = policy_set(
        team=team,
        slug="default",
        document={**POLICY, "rules": [*POLICY["rules"], {"effect": "allow", "tools": ["x"]}]},
        comment="allow x",
        created_by="tessa",
    )
    # The plan was issued a minute before its refresh (token times are whole seconds).
    issued_at = timezone.now() - timedelta(minutes=1)
    plan.tokens.update(issued_at=issued_at)
    refreshed = plan_refresh(agent=agent.agent, plan_id=plan.pk, token=issued.token)
    under_v1 = decide(plan, issued_at + timedelta(seconds=1), step=0)
    under_v2 = decide(
        plan,
        refreshed.issued_at + timedelta(seconds=1),
        tool="github_get_issue",
        decision=Decision.MAX_CALLS_EXCEEDED,
        step=1,
    )
    other_agent = make_agent(team, "deployer", plan.policy_version)
    sam_plan = plan_issue(agent=other_agent.agent, document=plan_document(user="sam@acme.dev")).plan
    sams = decide(sam_plan, sam_plan.created_at, tool="github_list_issues", step=0)
    url = reverse("admin:plans_planevent_changelist")

    def shown(query: dict) -> set[int]:
        html = page(auditor_client, url, query)
        return {
            event.pk
            for event in (under_v1, under_v2, sams)
            if reverse("admin:plans_planevent_change", args=[event.pk]) in html
        }

    assert shown({}) == {under_v1.pk, under_v2.pk, sams.pk}
    assert shown({"agent": str(agent.agent.pk)}) == {under_v1.pk, under_v2.pk}
    assert shown({"member_email": "SAM@acme.dev"}) == {sams.pk}
    assert shown({"tool": "github_get_issue"}) == {under_v2.pk}
    assert shown({"decision": Decision.MAX_CALLS_EXCEEDED}) == {under_v2.pk}
    assert shown({"decision": "blocked"}) == {under_v2.pk}
    assert shown({"decision": Decision.ALLOWED}) == {under_v1.pk, sams.pk}
    assert shown({"policy_version": str(v2.pk)}) == {under_v2.pk, sams.pk}
    assert shown({"policy_version": str(plan.policy_version_id)}) == {under_v1.pk}
    assert shown({"q": plan.pk}) == {under_v1.pk, under_v2.pk}
    assert shown({"q": plan.pk[:-1]}) == set()  # exact, not a prefix

    html = page(auditor_client, url, {"q": plan.pk})
    assert "alice@acme.dev" in html and agent.agent.name in html
    assert "default v1" in html and "default v2" in html
    assert "step 1" in html and "step 2" in html and "step 0" not in html


def test_a_decision_page_names_its_plan_policy_version_author_comment_and_step(
    auditor_client, team, agent, issued
):
    plan = issued.plan
    v2 = policy_set(
        team=team,
        slug="default",
        document={**POLICY, "rules": [*POLICY["rules"], {"effect": "allow", "tools": ["x"]}]},
        comment="let agents call x",
        created_by="tessa",
    )
    refreshed = plan_refresh(agent=agent.agent, plan_id=plan.pk, token=issued.token)
    event = decide(
        plan, refreshed.issued_at + timedelta(seconds=1), tool="github_get_issue", step=1
    )

    html = page(auditor_client, reverse("admin:plans_planevent_change", args=[event.pk]))

    assert reverse("admin:plans_plan_change", args=[plan.pk]) in html
    assert reverse("admin:plans_plan_timeline", args=[plan.pk]) in html
    assert reverse("admin:policies_policyversion_change", args=[v2.pk]) in html
    assert "tessa" in html and "let agents call x" in html
    assert "step 2: <code>github_get_issue</code>" in html
    assert "alice@acme.dev" in html and agent.agent.name in html


def test_who_allowed_this_call_under_which_version_is_answered_on_the_decision_page(
    auditor_client, team, agent, issued
):
    """The guard reports the rule and the version number of the token it held: the page
    links that version (not the newest), shows the rule as published, its author and
    comment, though the call came after a refresh to a newer version."""
    plan = issued.plan
    plan.tokens.update(issued_at=timezone.now() - timedelta(minutes=1))
    narrowed = {**POLICY, "rules": [POLICY["rules"][1], POLICY["rules"][0]]}
    v2 = policy_set(
        team=team, slug="default", document=narrowed, comment="deny first", created_by="tessa"
    )
    refreshed = plan_refresh(agent=agent.agent, plan_id=plan.pk, token=issued.token)
    event = decide(
        plan,
        refreshed.issued_at + timedelta(seconds=5),  # after the refresh, with the old token
        tool="github_get_issue",
        step=1,
        rule_index=0,
        rule_description="allow github_* (rules[0])",
        policy_version=1,
    )
    v1 = plan.policy_version

    html = page(auditor_client, reverse("admin:plans_planevent_change", args=[event.pk]))
    v1_url = reverse("admin:policies_policyversion_change", args=[v1.pk])

    assert f'href="{v1_url}#rules-0"' in html
    assert "allow github_* (rules[0])" in html
    assert "&quot;github_*&quot;" in html and "acme/*" in html  # the rule as published
    assert reverse("admin:policies_policyversion_change", args=[v2.pk]) not in html
    listed = page(
        auditor_client, reverse("admin:plans_planevent_changelist"), {"policy_version": v1.pk}
    )
    assert reverse("admin:plans_planevent_change", args=[event.pk]) in listed
    timeline = timeline_page(auditor_client, plan)
    assert f'href="{v1_url}#rules-0"' in timeline


def test_a_decision_the_default_made_says_so(auditor_client, plan):
    event = decide(
        plan,
        plan.created_at,
        tool="send_email",
        decision=Decision.POLICY_DENIED,
        step=None,
        rule_description="the policy default (deny)",
    )
    html = page(auditor_client, reverse("admin:plans_planevent_change", args=[event.pk]))
    assert "No rule: the policy default (deny)." in html
    plain = decide(plan, plan.created_at, decision=Decision.MAX_CALLS_EXCEEDED)
    html = page(auditor_client, reverse("admin:plans_planevent_change", args=[plain.pk]))
    assert "The policy was not consulted" in html


def test_a_policy_version_page_anchors_each_rule(auditor_client, policy_version):
    html = page(
        auditor_client, reverse("admin:policies_policyversion_change", args=[policy_version.pk])
    )
    for index in range(len(POLICY["rules"])):
        assert f'id="rules-{index}"' in html
    assert "<code>rules[1]</code>" in html


# --- plans by planned tool ----------------------------------------------------------------


def test_plans_filter_by_a_tool_they_planned_exactly(auditor_client, agent):
    emailing = plan_issue(
        agent=agent.agent, document=plan_document(steps=[{"tool": "send_email"}])
    ).plan
    listing = plan_issue(
        agent=agent.agent,
        document=plan_document(goal="send_email later, not now"),
    ).plan
    url = reverse("admin:plans_plan_changelist")

    def shown(tool: str) -> set[str]:
        html = page(auditor_client, url, {"tool": tool})
        return {plan.pk for plan in (emailing, listing) if plan.pk in html}

    assert shown("send_email") == {emailing.pk}
    assert shown("github_list_issues") == {listing.pk}
    assert shown("send") == set()  # a whole tool name, not a part of one
    assert shown("") == {emailing.pk, listing.pk}
    html = page(auditor_client, url)
    assert '<option value="send_email">' in html  # suggested from the recent plans


# --- export ---------------------------------------------------------------------------------


def test_the_plans_and_decisions_lists_export_what_they_show(auditor_client, agent, issued):
    plan = issued.plan
    other = plan_issue(agent=agent.agent, document=plan_document(steps=[{"tool": "send_email"}]))
    decide(plan, plan.created_at, step=0)
    plans_html = page(
        auditor_client, reverse("admin:plans_plan_changelist"), {"tool": "send_email"}
    )
    assert "Export CSV" in plans_html and "Export JSON Lines" in plans_html
    assert reverse("admin:plans_plan_export_csv") + "?tool=send_email" in plans_html

    plans_csv = exported(auditor_client, "admin:plans_plan_export_csv", {"tool": "send_email"})
    decisions = [
        json.loads(line)
        for line in exported(
            auditor_client, "admin:plans_planevent_export_jsonl", {"q": plan.pk}
        ).splitlines()
    ]

    assert other.plan.pk in plans_csv and plan.pk not in plans_csv
    assert decisions == [
        {
            "occurred_at": decisions[0]["occurred_at"],
            "received_at": decisions[0]["received_at"],
            "plan": plan.pk,
            "agent": agent.agent.name,
            "member": "alice@acme.dev",
            "tool": "github_list_issues",
            "decision": "allowed",
            "step": 1,
            "rule_index": None,
            "rule_description": "",
            "policy": "default",
            "policy_version": 1,
            "reason": "",
            "args_digest": "",
            "args": None,
            "amounts": None,
            # No review rule asked: no approval.
            "approved_by": None,
            "approved_at": None,
            "approval_reason": None,
        }
    ]


# --- one team never sees another's ----------------------------------------------------------


def test_an_auditor_never_sees_another_teams_plans_decisions_or_records(
    auditor_client, other_plan, other_agent, plan
):
    theirs = decide(other_plan, other_plan.created_at, tool="globex_secret_tool", step=0)
    record_append(
        team=other_plan.team,
        kind=AuditRecord.Kind.REFRESH_REFUSED,
        plan_id=other_plan.pk,
        code="globex-refusal",
    )
    # A record of theirs that names our plan id still belongs to their team.
    record_append(
        team=other_plan.team,
        kind=AuditRecord.Kind.REFRESH_REFUSED,
        plan_id=plan.pk,
        code="globex-forged",
    )

    assert (
        auditor_client.get(reverse("admin:plans_plan_timeline", args=[other_plan.pk])).status_code
        == 404
    )
    event_page = auditor_client.get(reverse("admin:plans_planevent_change", args=[theirs.pk]))
    assert event_page.status_code == 302  # the admin's "no such object" redirect
    assert "globex-forged" not in timeline_page(auditor_client, plan)
    for name, query in (
        ("admin:plans_planevent_changelist", {}),
        ("admin:plans_planevent_changelist", {"q": other_plan.pk}),
        ("admin:plans_plan_changelist", {"tool": "github_list_issues"}),
        ("admin:plans_plan_changelist", {}),
    ):
        html = page(auditor_client, reverse(name), query)
        assert reverse("admin:plans_plan_change", args=[other_plan.pk]) not in html
        assert reverse("admin:plans_planevent_change", args=[theirs.pk]) not in html
        assert "globex_secret_tool" not in html and other_agent.agent.name not in html
    for name in ("admin:plans_planevent_export_csv", "admin:plans_plan_export_csv"):
        assert other_plan.pk not in exported(auditor_client, name)
    versions = page(auditor_client, reverse("admin:plans_planevent_changelist"))
    assert f"policy_version={other_plan.policy_version_id}" not in versions


# --- query counts -------------------------------------------------------------------------


def test_auditor_lists_and_pages_do_not_query_per_row(auditor_client, team, agent):
    grow(team, agent, 0)
    plan = Plan.objects.get()
    pages = [
        (reverse("admin:plans_planevent_changelist"), {"decision": "allowed"}),
        (
            reverse("admin:plans_planevent_changelist"),
            {"policy_version": str(plan.policy_version_id)},
        ),
        (reverse("admin:plans_plan_changelist"), {"tool": "github_get_issue"}),
    ]

    def measure() -> list[int]:
        counts = []
        for url, query in pages:
            with CaptureQueriesContext(connection) as captured:
                assert auditor_client.get(url, query).status_code == 200
            counts.append(len(captured))
        return counts

    few = measure()
    for index in range(1, 20):
        grow(team, agent, index)
    assert measure() == few


def test_no_link_an_auditor_can_follow_answers_forbidden(auditor_client, agent, issued):
    """Crawl every admin page an auditor can reach from the index (each path once) and
    follow every link on it: none leads to a 403."""
    plan = issued.plan
    decide(plan, plan.created_at, step=0, rule_index=0, rule_description="allow (rules[0])")
    PlanDisplayUpdate.objects.create(plan=plan, message=items_update("pending"))
    record_append(team=plan.team, kind=AuditRecord.Kind.REFRESH_REFUSED, plan_id=plan.pk, code="x")
    seen_paths: set[str] = set()
    queue = [("/admin/", "")]
    forbidden: list[tuple[str, str]] = []  # (link, the page it was on)
    pages = 0
    while queue and pages < 400:
        url, found_on = queue.pop(0)
        response = auditor_client.get(url)
        pages += 1
        if response.status_code == 403:
            forbidden.append((url, found_on))
            continue
        if response.status_code != 200 or "text/html" not in response.get("Content-Type", ""):
            continue
        for href in re.findall(r'href="(/admin/[^"#]*)', response.content.decode()):
            href = href.replace("&amp;", "&")
            path = href.split("?", 1)[0]
            if path in seen_paths or "/logout/" in path or "/export/" in path:
                continue
            seen_paths.add(path)
            queue.append((href, url))
    assert pages > 30  # the crawl reached the auditor's pages
    assert forbidden == []
