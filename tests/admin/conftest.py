"""Admin personas: a superuser, a team admin and an auditor of the "default" team, and a
team admin of another team. They get their rights the way people do: the groups created
by the data migration, and Team.staff."""

from __future__ import annotations

import importlib

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from plans.models import Plan
from plans.services import plan_issue
from teams.models import Team
from tests.conftest import plan_document

TEAM_ADMINS = "Team admins"
AUDITORS = "Auditors"
KEY_OPERATORS = "Key operators"
PASSWORD = "correct horse battery staple"


def ensure_admin_groups() -> None:
    """The groups come from a data migration; a transactional test's flush removes them
    for the tests that follow, so put them back with the migration's own function."""
    importlib.import_module("members.migrations.0003_admin_groups").grant(Group, Permission)
    importlib.import_module("members.migrations.0004_key_operators").grant(Group, Permission)


@pytest.fixture(autouse=True)
def admin_groups(db) -> None:
    ensure_admin_groups()


def make_staff(username: str, *, group: str | None, teams: list[Team]) -> User:
    user = User.objects.create_user(username, f"{username}@example.test", PASSWORD, is_staff=True)
    if group:
        user.groups.add(Group.objects.get(name=group))
    for team in teams:
        team.staff.add(user)
    return user


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def superuser(db) -> User:
    return User.objects.create_superuser("root", "root@example.test", PASSWORD)


@pytest.fixture
def team_admin(team) -> User:
    return make_staff("tessa", group=TEAM_ADMINS, teams=[team])


@pytest.fixture
def auditor(team) -> User:
    return make_staff("audrey", group=AUDITORS, teams=[team])


@pytest.fixture
def key_operator(db) -> User:
    """Rotates and revokes the signing keys every team shares; no team of their own."""
    return make_staff("kim", group=KEY_OPERATORS, teams=[])


@pytest.fixture
def key_operator_client(key_operator) -> Client:
    return logged_in(key_operator)


@pytest.fixture
def other_team_admin(other_team) -> User:
    return make_staff("otto", group=TEAM_ADMINS, teams=[other_team])


@pytest.fixture
def superuser_client(superuser) -> Client:
    return logged_in(superuser)


@pytest.fixture
def team_admin_client(team_admin) -> Client:
    return logged_in(team_admin)


@pytest.fixture
def auditor_client(auditor) -> Client:
    return logged_in(auditor)


@pytest.fixture
def issued(agent):
    """A plan issued to the team's agent through the same service as the API."""
    return plan_issue(agent=agent.agent, document=plan_document())


@pytest.fixture
def plan(issued) -> Plan:
    return issued.plan


@pytest.fixture
def other_plan(other_agent) -> Plan:
    return plan_issue(agent=other_agent.agent, document=plan_document(user="olga@globex.test")).plan
