"""Team admins edit their teams' alert rules in the console and see the alerts and each
delivery attempt; another team's admin sees none of it; an auditor only reads."""

from __future__ import annotations

from django.urls import reverse

from notify.alerts import alert_raise, alert_rule_save
from notify.models import AlertDelivery, AlertRule
from tests.admin.conftest import logged_in
from tests.notify.conftest import TEAM_ADMINS, make_person

ADD = reverse("admin:notify_alertrule_add")


def rule_form(team, **changes) -> dict:
    return {
        "team": team.pk,
        "kind": "blocked_calls",
        "threshold": "5",
        "window_minutes": "10",
        "wait_minutes": "30",
        "dedup_minutes": "60",
        "channels": ["email"],
        "email_to": "oncall@acme.dev",
        "enabled": "on",
        **changes,
    }


def test_a_team_admin_adds_a_rule_for_their_team(team):
    client = logged_in(make_person("tessa", "tessa@acme.dev", group=TEAM_ADMINS, teams=[team]))

    response = client.post(ADD, rule_form(team))

    assert response.status_code == 302, response.content[:3000]
    rule = AlertRule.objects.get()
    assert (rule.team, rule.kind, rule.threshold, rule.channels) == (
        team,
        "blocked_calls",
        5,
        ["email"],
    )


def test_a_rule_that_cannot_work_is_shown_with_its_error_and_nothing_written(team):
    client = logged_in(make_person("tessa", "tessa@acme.dev", group=TEAM_ADMINS, teams=[team]))

    response = client.post(ADD, rule_form(team, channels=["webhook"]))

    assert response.status_code == 200
    assert "the team has no webhook" in response.content.decode()
    assert not AlertRule.objects.exists()


def test_a_team_admin_cannot_add_a_rule_for_another_team(team, other_team):
    client = logged_in(make_person("tessa", "tessa@acme.dev", group=TEAM_ADMINS, teams=[team]))

    response = client.post(ADD, rule_form(other_team))

    assert response.status_code == 200
    assert not AlertRule.objects.exists()


def test_another_teams_admin_sees_neither_the_rules_nor_the_alerts(team, other_team):
    rule = alert_rule_save(
        rule=AlertRule(team=team, kind="decisions_lost", channels=["email"], email_to="a@b.test")
    )
    alert = alert_raise(rule=rule, subject="p1", summary="lost one", url="https://x.test/").alert
    AlertDelivery.objects.create(
        team=team, alert=alert, channel="email", attempt=1, error="SMTPException: refused"
    )
    mine = logged_in(make_person("tessa", "tessa@acme.dev", group=TEAM_ADMINS, teams=[team]))
    theirs = logged_in(make_person("gus", "gus@globex.test", group=TEAM_ADMINS, teams=[other_team]))

    page = mine.get(reverse("admin:notify_alert_changelist")).content.decode()
    assert "lost one" in page and "SMTPException: refused" in page
    detail = mine.get(reverse("admin:notify_alert_change", args=[alert.pk])).content.decode()
    assert "SMTPException: refused" in detail

    assert "lost one" not in theirs.get(reverse("admin:notify_alert_changelist")).content.decode()
    assert theirs.get(reverse("admin:notify_alert_change", args=[alert.pk])).status_code in (
        302,
        404,
    )
    assert theirs.get(reverse("admin:notify_alertrule_change", args=[rule.pk])).status_code in (
        302,
        404,
    )
    rules_page = theirs.get(reverse("admin:notify_alertrule_changelist")).content.decode()
    assert "0 alert rules" in rules_page


def test_an_auditor_reads_the_rules_but_does_not_edit_them(team):
    rule = alert_rule_save(
        rule=AlertRule(team=team, kind="decisions_lost", channels=["email"], email_to="a@b.test")
    )
    auditor = logged_in(make_person("audrey", "audrey@acme.dev", group="Auditors", teams=[team]))

    assert auditor.get(reverse("admin:notify_alertrule_changelist")).status_code == 200
    assert auditor.post(ADD, rule_form(team)).status_code == 403
    response = auditor.post(
        reverse("admin:notify_alertrule_change", args=[rule.pk]), rule_form(team, threshold="1")
    )
    assert response.status_code == 403
    rule.refresh_from_db()
    assert rule.threshold == 10
