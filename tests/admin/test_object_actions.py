"""Where an action's confirmation page sends the user back: the object's page when the
action was started there (or the ``next`` it was given), the posted ``next`` from the
change list. The object-action view passes it to ``confirm_action`` as an argument."""

from __future__ import annotations

from django.urls import reverse

from plans.models import Plan


def hidden_next(html: str) -> str | None:
    marker = '<input type="hidden" name="next" value="'
    if marker not in html:
        return None
    return html.split(marker, 1)[1].split('"', 1)[0]


def test_an_object_action_goes_back_to_the_object_page(team_admin_client, plan):
    confirm = team_admin_client.get(reverse("admin:plans_plan_revoke_plans", args=[plan.pk]))

    assert confirm.status_code == 200
    assert hidden_next(confirm.content.decode()) == reverse(
        "admin:plans_plan_change", args=[plan.pk]
    )
    plan.refresh_from_db()
    assert plan.status == Plan.Status.ACTIVE


def test_an_object_action_keeps_the_next_it_was_given(team_admin_client, plan):
    back = reverse("admin:plans_plan_changelist") + "?status=active"
    confirm = team_admin_client.get(
        reverse("admin:plans_plan_revoke_plans", args=[plan.pk]), {"next": back}
    )

    assert confirm.status_code == 200
    assert hidden_next(confirm.content.decode()) == back.replace("&", "&amp;")
    plan.refresh_from_db()
    assert plan.status == Plan.Status.ACTIVE


def test_a_change_list_action_keeps_the_posted_next_or_none(team_admin_client, plan):
    url = reverse("admin:plans_plan_changelist")
    selected = {"action": "revoke_plans", "_selected_action": [plan.pk]}

    plain = team_admin_client.post(url, selected)
    with_next = team_admin_client.post(url, {**selected, "next": "/admin/plans/"})

    assert plain.status_code == 200 and with_next.status_code == 200
    assert hidden_next(plain.content.decode()) is None
    assert hidden_next(with_next.content.decode()) == "/admin/plans/"
    plan.refresh_from_db()
    assert plan.status == Plan.Status.ACTIVE
