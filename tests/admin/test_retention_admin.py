"""A team admin sets the team's retention period; a plan whose old decisions retention
removed says so on its page."""

from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from audit.services import records_seal
from plans.models import PlanEvent
from plans.retention import retention_apply
from teams.models import Team
from tests.plans.test_retention import declare_with_events


def test_a_team_admin_sets_the_retention_period_within_1_to_3650_days(team_admin_client, team):
    url = reverse("admin:teams_team_change", args=[team.pk])
    form = {"name": team.name, "log_call_arguments": "", "retention_days": "0"}

    refused = team_admin_client.post(url, form)
    team.refresh_from_db()
    after_refusal = team.retention_days
    accepted = team_admin_client.post(url, {**form, "retention_days": "90"})
    team.refresh_from_db()

    assert refused.status_code == 200
    assert "retention_days" in refused.context["adminform"].form.errors
    assert after_refusal == 400
    assert accepted.status_code == 302
    assert team.retention_days == 90


def test_the_plan_page_says_decisions_before_the_cutoff_were_removed(auditor_client, agent, team):
    Team.objects.filter(pk=team.pk).update(retention_days=30)
    plan_id = declare_with_events(agent, 40, 1)
    records_seal()
    url = reverse("admin:plans_plan_change", args=[plan_id])
    before = auditor_client.get(url).content.decode()

    (result,) = [r for r in retention_apply() if r.team_id == team.pk]
    after = auditor_client.get(url).content.decode()

    assert 'id="decisions-removed"' not in before
    assert 'id="decisions-removed"' in after
    assert "removed by retention" in after
    assert timezone.localtime(result.cutoff).strftime("%Y-%m-%d %H:%M") in after
    assert result.cutoff < timezone.now() - timedelta(days=29)
    assert PlanEvent.objects.filter(plan_id=plan_id).count() == 1
