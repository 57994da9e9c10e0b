"""Team admins set their team's webhook in the admin: the secret is typed in, stored
encrypted, never shown again, and kept when left empty; another team's admin sees none
of it; every attempt is listed, read-only."""

from __future__ import annotations

from django.urls import reverse

from audit.models import AuditRecord
from notify.models import TeamWebhook, WebhookDelivery
from notify.webhooks import team_webhook_save, webhook_secret
from tests.admin.conftest import logged_in
from tests.notify.conftest import TEAM_ADMINS, make_person

ADD = reverse("admin:notify_teamwebhook_add")
SECRET = "whsec-0123456789abcdef"


def test_a_team_admin_sets_the_webhook_and_its_secret_is_never_shown(team):
    admin = make_person("tessa", "tessa@acme.dev", group=TEAM_ADMINS, teams=[team])
    client = logged_in(admin)

    response = client.post(
        ADD,
        {
            "team": team.pk,
            "url": "https://hooks.example.test/plangate",
            "secret": SECRET,
            "active": "on",
        },
    )

    assert response.status_code == 302, response.content[:2000]
    webhook = TeamWebhook.objects.get(team=team)
    assert webhook_secret(webhook) == SECRET
    assert SECRET not in webhook.secret_encrypted
    page = client.get(reverse("admin:notify_teamwebhook_change", args=[webhook.pk])).content
    assert SECRET.encode() not in page
    record = AuditRecord.objects.get(
        kind=AuditRecord.Kind.CHANGE, details__object="approval_webhook"
    )
    assert record.actor == "tessa"
    assert record.details["changes"]["secret"] == [None, "(changed)"]
    assert SECRET not in str(record.details)

    client.post(
        reverse("admin:notify_teamwebhook_change", args=[webhook.pk]),
        {"url": "https://hooks.example.test/moved", "secret": "", "active": "on"},
    )

    webhook.refresh_from_db()
    assert webhook.url == "https://hooks.example.test/moved"
    assert webhook_secret(webhook) == SECRET


def test_a_short_secret_is_refused_and_nothing_is_written(team):
    client = logged_in(make_person("tessa", "tessa@acme.dev", group=TEAM_ADMINS, teams=[team]))

    response = client.post(
        ADD,
        {"team": team.pk, "url": "https://hooks.example.test/a", "secret": "short", "active": "on"},
    )

    assert response.status_code == 200
    assert "Use 16 to 200 characters" in response.content.decode()
    assert not TeamWebhook.objects.exists()
    assert not AuditRecord.objects.filter(details__object="approval_webhook").exists()


def test_another_teams_admin_sees_neither_the_webhook_nor_its_deliveries(team, other_team):
    webhook = team_webhook_save(team=team, url="https://hooks.example.test/a", secret=SECRET)
    WebhookDelivery.objects.create(
        webhook=webhook, plan_id="01JAAAAAAAAAAAAAAAAAAAAAAA", event="approval_requested", attempt=1
    )
    client = logged_in(
        make_person("otto", "otto@globex.test", group=TEAM_ADMINS, teams=[other_team])
    )

    assert (
        "hooks.example.test"
        not in client.get(reverse("admin:notify_teamwebhook_changelist")).content.decode()
    )
    assert (
        "01JAAAAAAAAAAAAAAAAAAAAAAA"
        not in client.get(reverse("admin:notify_webhookdelivery_changelist")).content.decode()
    )
    change = client.get(reverse("admin:notify_teamwebhook_change", args=[webhook.pk]))
    assert change.status_code in (302, 404)
    own = logged_in(make_person("tessa", "tessa@acme.dev", group=TEAM_ADMINS, teams=[team]))
    assert (
        "01JAAAAAAAAAAAAAAAAAAAAAAA"
        in own.get(reverse("admin:notify_webhookdelivery_changelist")).content.decode()
    )
