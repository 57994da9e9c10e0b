"""An auditor in a real browser: the team's audit trail, filtered, exported as CSV with
the filter it shows; no audit-token page for them."""

from __future__ import annotations

import csv
import importlib
import io
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission, User
from playwright.sync_api import expect

from audit.models import AuditRecord
from audit.services import records_seal
from members.services import team_get_or_create
from tests.admin.conftest import AUDITORS, ensure_admin_groups
from tests.audit.helpers import append

from .conftest import log_in

pytestmark = [pytest.mark.browser]

PASSWORD = "correct horse battery staple"


@pytest.fixture
def trail(transactional_db):
    ensure_admin_groups()
    importlib.import_module("audit.migrations.0003_audit_view_permissions").grant(Group, Permission)
    acme = team_get_or_create(slug="default", name="Acme")
    globex = team_get_or_create(slug="globex", name="Globex")
    append(acme, 4)
    append(acme, 3, kind=AuditRecord.Kind.PLAN_REFUSED, code="unknown_user", user="=cmd()")
    append(globex, 2, kind=AuditRecord.Kind.PLAN_REFUSED, user="olga@globex.test")
    records_seal()
    auditor = User.objects.create_user("audrey", password=PASSWORD, is_staff=True)
    auditor.groups.add(Group.objects.get(name=AUDITORS))
    acme.staff.add(auditor)
    return acme


def test_an_auditor_filters_the_trail_and_exports_what_it_shows(page, trail):
    log_in(page, "audrey", PASSWORD)
    expect(page.get_by_role("link", name="Audit tokens")).to_have_count(0)
    page.get_by_role("link", name="Audit records").first.click()
    expect(page.locator("h1")).to_have_text("Audit trail")
    expect(page.locator(".plangate-badge.ok").first).to_contain_text("sealed #")
    page.locator("#changelist-filter").get_by_role("link", name="plan refused").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(3)

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Export CSV").click()
    download = download_info.value
    assert download.suggested_filename.startswith("audit-trail-")
    rows = list(csv.DictReader(io.StringIO(Path(download.path()).read_text(encoding="utf-8"))))
    assert len(rows) == 3
    assert {row["kind"] for row in rows} == {"plan_refused"}
    assert {row["team"] for row in rows} == {trail.slug}
    assert {row["user"] for row in rows} == {"'=cmd()"}
