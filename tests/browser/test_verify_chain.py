"""An auditor verifies the audit chain from the console, with no operator: intact, then, after
a record is edited in the database, broken at that record."""

from __future__ import annotations

import importlib

import pytest
from django.contrib.auth.models import Group, Permission, User
from playwright.sync_api import expect

from audit.models import AuditRecord
from audit.services import records_seal
from members.services import team_get_or_create
from tests.admin.conftest import AUDITORS, ensure_admin_groups
from tests.audit.helpers import append, record_id_at, sql

from .conftest import log_in

pytestmark = [pytest.mark.browser]

PASSWORD = "correct horse battery staple"
TABLE = AuditRecord._meta.db_table


@pytest.fixture
def audrey(transactional_db) -> User:
    ensure_admin_groups()
    importlib.import_module("audit.migrations.0003_audit_view_permissions").grant(Group, Permission)
    team = team_get_or_create(slug="default", name="Acme")
    user = User.objects.create_user("audrey", password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=AUDITORS))
    team.staff.add(user)
    append(team, 6)
    records_seal()
    return user


def test_an_auditor_verifies_the_chain_and_sees_where_it_broke(page, audrey):
    log_in(page, "audrey", PASSWORD)
    page.goto("/admin/audit/auditrecord/")
    page.get_by_role("link", name="Verify chain").click()

    expect(page.locator("h1")).to_have_text("Verify the audit chain")
    expect(page.locator("#chain-results li")).to_have_count(1)
    expect(page.locator("#chain-results li")).to_contain_text("team default:")
    expect(page.locator("#chain-results li")).to_contain_text("chain intact")
    expect(page.locator("#chain-summary")).to_have_text("verified 1 team(s): every chain is intact")

    team = audrey.plangate_teams.get()
    victim = record_id_at(team, 4)
    sql(f"UPDATE {TABLE} SET code = %s WHERE id = %s", ["policy_denied", victim])  # noqa: S608
    page.get_by_role("link", name="Verify again").click()

    result = page.locator("#chain-results li.broken")
    expect(result).to_contain_text(f"team default: chain broken at seq 4, id {victim}: changed")
    expect(result).to_contain_text("its content does not hash to its stored hash")
    expect(page.locator("#chain-summary")).to_have_text(
        "the audit trail of 1 team(s) was tampered with"
    )
