"""Admin personas for the audit pages, with their rights from the data migrations."""

from __future__ import annotations

import importlib

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from tests.admin.conftest import AUDITORS, TEAM_ADMINS, ensure_admin_groups, logged_in, make_staff


@pytest.fixture
def audit_groups(db) -> None:
    """The admin groups with the audit view permissions (a transactional test's flush
    removes them: put them back with the migrations' own functions)."""
    ensure_admin_groups()
    importlib.import_module("audit.migrations.0003_audit_view_permissions").grant(Group, Permission)


@pytest.fixture
def superuser_client(db) -> Client:
    return logged_in(User.objects.create_superuser("root", "root@example.test", "pw-root-123"))


@pytest.fixture
def auditor_client(audit_groups, team) -> Client:
    return logged_in(make_staff("audrey", group=AUDITORS, teams=[team]))


@pytest.fixture
def team_admin_client(audit_groups, team) -> Client:
    return logged_in(make_staff("tessa", group=TEAM_ADMINS, teams=[team]))


@pytest.fixture
def other_auditor_client(audit_groups, other_team) -> Client:
    return logged_in(make_staff("oscar", group=AUDITORS, teams=[other_team]))


@pytest.fixture
def bare_staff_client(audit_groups, team) -> Client:
    """Staff of the team with no group: no view permission on anything."""
    return logged_in(make_staff("nora", group=None, teams=[team]))
