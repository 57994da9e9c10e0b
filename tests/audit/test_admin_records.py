"""The audit trail's admin pages: read-only, team-scoped, filtered, with export."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.utils import timezone

from audit.models import AuditRecord
from audit.services import records_seal

from .helpers import append, emptied_by_retention

TRAIL = "/admin/audit/auditrecord/"
REFUSED = "/admin/audit/refusedattempt/"
ACTIVITY = "/admin/audit/activityrecord/"


def export(client, url: str, export_format: str, query: str = "") -> list:
    response = client.get(f"{url}export/{export_format}/{query}")
    assert response.status_code == 200, response.content[:500]
    assert response.streaming
    assert response["Content-Disposition"].startswith("attachment; filename=")
    text = b"".join(response.streaming_content).decode()
    if export_format == "csv":
        assert response["Content-Type"].startswith("text/csv")
        return list(csv.DictReader(io.StringIO(text)))
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def trail(team, other_team):
    append(team, 3, user="alice@acme.dev", plan_id="01JAAAAAAAAAAAAAAAAAAAAAAA")
    append(
        team,
        2,
        kind=AuditRecord.Kind.PLAN_REFUSED,
        user='=HYPERLINK("http://evil")',
        code="unknown_user",
        agent_name="crawler",
        agent_id="01JAGENT000000000000000009",
        details={"errors": [{"path": "user", "detail": "not a member"}]},
    )
    append(
        team,
        1,
        kind=AuditRecord.Kind.CHANGE,
        actor="tessa",
        user="",
        details={
            "object": "member",
            "name": "bob",
            "action": "updated",
            "changes": {"role": ["engineer", "sre"]},
        },
    )
    append(other_team, 4, user="olga@globex.test")
    records_seal()
    append(team, 1, code="late", user="")  # not sealed yet
    return team


def test_an_auditor_reads_their_teams_trail_only_and_cannot_change_it(trail, auditor_client):
    response = auditor_client.get(TRAIL)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Audit trail" in page
    assert "olga@globex.test" not in page
    assert "alice@acme.dev" in page
    assert "unsealed" in page and "sealed #" in page
    shown = {row.pk for row in response.context["cl"].result_list}
    assert shown == set(AuditRecord.objects.filter(team=trail).values_list("pk", flat=True))
    record = AuditRecord.objects.filter(team=trail).first()
    assert auditor_client.get(f"{TRAIL}{record.pk}/change/").status_code == 200
    assert auditor_client.get(f"{TRAIL}add/").status_code == 403
    assert auditor_client.post(f"{TRAIL}{record.pk}/delete/", {"post": "yes"}).status_code == 403
    other = AuditRecord.objects.exclude(team=trail).first()
    assert auditor_client.get(f"{TRAIL}{other.pk}/change/").status_code == 302  # not found


def test_nobody_edits_a_record_in_the_admin_not_even_a_superuser(trail, superuser_client):
    record = AuditRecord.objects.first()
    superuser_client.post(f"{TRAIL}{record.pk}/change/", {"user": "mallory"})
    assert AuditRecord.objects.get(pk=record.pk).user == record.user
    assert superuser_client.get(f"{TRAIL}add/").status_code == 403


def test_staff_without_the_view_permission_see_nothing(trail, bare_staff_client):
    assert bare_staff_client.get(TRAIL).status_code == 403
    assert bare_staff_client.get(f"{TRAIL}export/csv/").status_code == 403


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?kind=plan_refused", 2),
        ("?agent=crawler", 2),
        ("?agent=01JAGENT000000000000000009", 2),
        ("?user=ALICE@acme.dev", 3),
        ("?code=unknown_user", 2),
        ("?policy_version=default+v3", 7),
        ("?policy_version=default+v4", 0),
        ("?q=01JAAAAAAAAAAAAAAAAAAAAAAA", 3),
    ],
)
def test_the_trail_filters_and_searches(trail, auditor_client, query, expected):
    response = auditor_client.get(TRAIL + query)
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == expected


def test_refused_attempts_and_activity_list_their_kinds_only(trail, auditor_client):
    refused = auditor_client.get(REFUSED)
    assert refused.status_code == 200
    kind_filter = next(f for f in refused.context["cl"].filter_specs if f.title == "kind")
    assert [value for value, _ in kind_filter.lookup_choices] == [
        "plan_refused",
        "refresh_refused",
    ]
    assert {r.kind for r in refused.context["cl"].result_list} == {"plan_refused"}
    assert "user: not a member" in refused.content.decode()
    activity = auditor_client.get(ACTIVITY)
    assert activity.status_code == 200
    rows = activity.context["cl"].result_list
    assert {r.kind for r in rows} == {"change"}
    assert "tessa" in activity.content.decode() and "role" in activity.content.decode()


def test_the_export_buttons_carry_the_lists_query_string(trail, auditor_client):
    page = auditor_client.get(TRAIL + "?kind=plan_refused&p=1").content.decode()
    assert 'href="/admin/audit/auditrecord/export/csv/?kind=plan_refused"' in page
    assert 'href="/admin/audit/auditrecord/export/jsonl/?kind=plan_refused"' in page
    assert "Export CSV" in page and "Export JSON Lines" in page


def test_the_export_holds_every_filtered_row_of_every_page(team, auditor_client):
    append(team, 130)  # more than a page (100)
    append(team, 5, kind=AuditRecord.Kind.PLAN_REFUSED, code="policy_denied")
    records_seal()
    everything = export(auditor_client, TRAIL, "csv")
    assert len(everything) == AuditRecord.objects.filter(team=team).count() > 100
    refused = export(auditor_client, TRAIL, "jsonl", "?kind=plan_refused")
    assert len(refused) == 5 and {row["kind"] for row in refused} == {"plan_refused"}
    # Newest first, as the list shows them.
    assert [row["id"] for row in refused] == sorted((row["id"] for row in refused), reverse=True)


def test_an_export_makes_the_same_few_queries_for_any_number_of_rows(
    team, auditor_client, django_assert_max_num_queries
):
    append(team, 250)
    records_seal()
    with django_assert_max_num_queries(12):
        rows = export(auditor_client, TRAIL, "csv")
    assert len(rows) == AuditRecord.objects.filter(team=team).count()


def test_exports_are_team_scoped_and_carry_the_chain(trail, auditor_client, other_auditor_client):
    mine = export(auditor_client, TRAIL, "jsonl")
    theirs = export(other_auditor_client, TRAIL, "jsonl")
    assert {row["team"] for row in mine} == {trail.slug}
    assert {row["team"] for row in theirs} == {"globex"}
    sealed = [row for row in mine if row["seq"] is not None]
    stored = {r.pk: r for r in AuditRecord.objects.filter(team=trail)}
    for row in sealed:
        assert row["hash"] == stored[row["id"]].hash
    assert any(row["seq"] is None for row in mine)  # the unsealed one, exported too


def test_the_export_marks_a_record_retention_emptied_and_no_other(team, auditor_client):
    emptied, untouched = emptied_by_retention(team)
    rows = {int(row["id"]): row for row in export(auditor_client, TRAIL, "csv")}
    assert rows[emptied.pk]["redacted"] == "true"
    assert rows[emptied.pk]["user"] == rows[emptied.pk]["code"] == ""
    assert rows[emptied.pk]["hash"] == emptied.hash
    assert rows[untouched.pk]["redacted"] == "false"
    assert rows[untouched.pk]["code"] == "policy_denied"
    assert [pk for pk, row in rows.items() if row["redacted"] == "true"] == [emptied.pk]
    lines = {row["id"]: row for row in export(auditor_client, TRAIL, "jsonl")}
    assert (lines[emptied.pk]["redacted"], lines[untouched.pk]["redacted"]) == (True, False)


def test_a_csv_cell_that_would_run_as_a_formula_is_quoted(trail, auditor_client):
    rows = export(auditor_client, REFUSED, "csv")
    assert {row["user"] for row in rows} == {'\'=HYPERLINK("http://evil")'}
    assert json.loads(rows[0]["details"]) == {
        "errors": [{"path": "user", "detail": "not a member"}]
    }
    # JSON Lines are data for programs: left as they are.
    assert {row["user"] for row in export(auditor_client, REFUSED, "jsonl")} == {
        '=HYPERLINK("http://evil")'
    }


def test_the_activity_export_spells_out_each_change(trail, auditor_client):
    (row,) = export(auditor_client, ACTIVITY, "jsonl", "?actor=tessa")
    assert (row["object"], row["name"], row["action"]) == ("member", "bob", "updated")
    assert row["changes"] == {"role": ["engineer", "sre"]}


def test_an_export_with_a_filter_it_cannot_apply_goes_back_to_the_list(trail, auditor_client):
    response = auditor_client.get(f"{TRAIL}export/csv/?no_such_field=1")
    assert response.status_code == 302
    assert response["Location"].endswith("?e=1")


def test_the_trail_filters_by_day(trail, auditor_client):
    today = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    day = timedelta(days=1)
    query = urlencode({"at__gte": str(today), "at__lt": str(today + day)})
    response = auditor_client.get(f"{TRAIL}?{query}")
    assert len(response.context["cl"].result_list) == AuditRecord.objects.filter(team=trail).count()
    yesterday = urlencode({"at__gte": str(today - day), "at__lt": str(today)})
    assert len(auditor_client.get(f"{TRAIL}?{yesterday}").context["cl"].result_list) == 0
    assert "By day" in response.content.decode()


def test_a_team_filter_only_for_those_who_see_several_teams(
    trail, other_team, superuser_client, auditor_client
):
    def titles(client) -> list[str]:
        return [spec.title for spec in client.get(TRAIL).context["cl"].filter_specs]

    assert "team" in titles(superuser_client)
    assert "team" not in titles(auditor_client)
    only_globex = superuser_client.get(TRAIL + f"?team__id__exact={other_team.pk}")
    assert {r.team_id for r in only_globex.context["cl"].result_list} == {other_team.pk}
