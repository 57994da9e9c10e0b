"""The console's "Verify chain" page: what ``manage.py verify_audit`` prints, for the teams
the user sees, to anyone who may read the trail."""

from __future__ import annotations

import io
import re

from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse

from audit.models import AuditRecord
from audit.services import records_seal
from tests.admin.conftest import logged_in, make_staff

from .helpers import append, record_id_at, sql

URL = "/admin/audit/auditrecord/verify/"
TABLE = AuditRecord._meta.db_table


def command_lines(*arguments: str) -> list[str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("verify_audit", *arguments, stdout=out, stderr=err)
    except CommandError as failure:
        return [*err.getvalue().splitlines(), str(failure)]
    return out.getvalue().splitlines()


def page_lines(client) -> list[str]:
    response = client.get(URL)
    assert response.status_code == 200
    html = response.content.decode()
    lines = re.findall(r"<code>(team [^<]*)</code>", html)
    summary = re.search(r'<p id="chain-summary"[^>]*><strong>([^<]*)</strong>', html)
    assert summary is not None
    return [*lines, summary.group(1)]


def test_the_page_says_what_the_command_prints_for_an_intact_chain(
    superuser_client, team, other_team
):
    append(team, 3)
    append(other_team, 2)
    records_seal()
    append(team, 1)  # not sealed yet

    lines = page_lines(superuser_client)

    assert lines == command_lines()
    assert re.fullmatch(
        r"team default: \d+ records, chain intact, last hash \w{64}; 1 not sealed yet; "
        r"the tables the pages read agree with the trail "
        r"\(0 decisions, 0 plans, 0 tokens, 0 revocations\)",
        lines[0],
    )
    assert lines[-1] == "verified 2 team(s): every chain is intact"


def test_an_auditor_verifies_their_own_team_and_is_told_where_it_broke(
    auditor_client, team, other_team
):
    append(team, 5)
    append(other_team, 5)
    records_seal()
    victim = record_id_at(team, 3)
    sql(f'UPDATE {TABLE} SET "user" = %s WHERE id = %s', ["mallory@acme.dev", victim])  # noqa: S608

    lines = page_lines(auditor_client)

    assert lines == command_lines("--team", team.slug)
    assert lines[0].startswith(f"team {team.slug}: chain broken at seq 3, id {victim}: changed")
    assert lines[-1] == "the audit trail of 1 team(s) was tampered with"
    assert not any(other_team.slug in line for line in lines)  # another team's trail: unseen
    # Read-only: nothing was written, the record stays as it was found.
    assert AuditRecord.objects.get(pk=victim).user == "mallory@acme.dev"


def test_the_audit_trail_links_the_page(auditor_client):
    html = auditor_client.get(reverse("admin:audit_auditrecord_changelist")).content.decode()
    assert f'<a href="{URL}" class="plangate-verify-chain">Verify chain</a>' in html


def test_staff_who_may_not_read_the_trail_are_refused(db, team):
    nobody = make_staff("nora", group=None, teams=[team])
    assert logged_in(nobody).get(URL).status_code == 403
    assert not User.objects.filter(username="nora", is_superuser=True).exists()
