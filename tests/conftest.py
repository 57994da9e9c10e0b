"""Personas and building blocks shared by the whole suite."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from rest_framework.test import APIClient

from guard.agent.status_list import SHARED_STATUS_LISTS
from members.models import Agent, Member
from members.services import agent_create, api_key_create, member_upsert, team_get_or_create
from plans.status_list import status_list_cache_clear
from policies.models import PolicyVersion
from policies.services import policy_set
from teams.models import Team

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

# One home for how hard the property-based tests try; a test states its own settings only
# where it needs something else, and says why. No deadline and no too_slow health check:
# the machines are shared, and a timing is never a pass/fail criterion here.
settings.register_profile(
    "default",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# CI searches twice as far and prints the blob that replays a failure locally.
settings.register_profile(
    "ci", parent=settings.get_profile("default"), max_examples=200, print_blob=True
)
# `make check`: the quick loop while editing; CI and `make test` still run the full profile.
settings.register_profile("dev", parent=settings.get_profile("default"), max_examples=10)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if IN_CI else "default"))

POLICY = {
    "version": 1,
    "default": "deny",
    "rules": [
        {"effect": "allow", "tools": ["github_*"], "args": {"repo": {"glob": "acme/*"}}},
        {"effect": "deny", "tools": ["github_delete_*"]},
        {"effect": "allow", "tools": ["send_email"]},
        {
            "effect": "allow",
            "tools": ["deploy"],
            "roles": ["sre"],
            "groups": ["oncall"],
            "maxCalls": 5,
        },
    ],
}

PLAN = {
    "version": 1,
    "goal": "Summarise open issues",
    "user": "alice@acme.dev",
    "steps": [
        {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}, "maxCalls": 3},
        {"tool": "github_get_issue", "args": {"repo": {"eq": "acme/public-app"}}},
    ],
}


# Folders whose every test is `slow`: `make check` leaves them out, `make test` and CI run
# them. A folder's reason is why.
SLOW_FOLDERS = {
    "integration": "starts real processes (gunicorn, Celery, a fresh virtualenv)",
    "api_fuzz": "sends hundreds of requests through the whole stack",
}
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(TESTS):
            folder = item.path.relative_to(TESTS).parts[0]
            if folder in SLOW_FOLDERS:
                item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped in CI, where every service must be present: {reason}"


def plan_document(**overrides) -> dict:
    document = copy.deepcopy(PLAN)
    document.update(overrides)
    return document


@dataclass
class AgentPersona:
    agent: Agent
    api_key: str
    client: APIClient
    team: Team


def make_agent(team: Team, name: str, policy_version: PolicyVersion) -> AgentPersona:
    agent = agent_create(team=team, name=name, policy=policy_version.policy)
    _, plaintext = api_key_create(agent=agent)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return AgentPersona(agent=agent, api_key=plaintext, client=client, team=team)


@pytest.fixture(autouse=True)
def _no_status_list_held() -> Iterator[None]:
    """The guards of a process share the status lists they read (by URL); a test's server
    is not the next test's, so none is held from one test to the next; nor the server's
    signed lists (team ids repeat from one test's database to the next)."""
    yield
    SHARED_STATUS_LISTS.clear()
    status_list_cache_clear()


@pytest.fixture
def team(db) -> Team:
    return team_get_or_create(slug="default", name="Acme")


@pytest.fixture
def other_team(db) -> Team:
    return team_get_or_create(slug="globex", name="Globex")


@pytest.fixture
def policy_version(team) -> PolicyVersion:
    return policy_set(team=team, slug="default", document=POLICY)


@pytest.fixture
def member(team) -> Member:
    return member_upsert(
        team=team, email="alice@acme.dev", name="Alice", role="engineer", groups=["platform"]
    )


@pytest.fixture
def sre_member(team) -> Member:
    return member_upsert(
        team=team, email="sam@acme.dev", name="Sam", role="sre", groups=["oncall", "platform"]
    )


@pytest.fixture
def disabled_member(team) -> Member:
    return member_upsert(team=team, email="dora@acme.dev", name="Dora", is_active=False)


@pytest.fixture
def outsider(other_team) -> Member:
    return member_upsert(team=other_team, email="olga@globex.test", name="Olga")


@pytest.fixture
def agent(team, policy_version, member) -> AgentPersona:
    return make_agent(team, "summariser", policy_version)


@pytest.fixture
def other_agent(other_team, outsider) -> AgentPersona:
    version = policy_set(team=other_team, slug="default", document=POLICY)
    return make_agent(other_team, "globex-bot", version)


@pytest.fixture
def anonymous_client() -> APIClient:
    return APIClient()
