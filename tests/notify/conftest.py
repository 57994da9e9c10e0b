"""Approvals' people and plans: a policy with a review rule, a plan waiting for a person,
approvers of two teams, and a real local HTTP server that receives the webhook."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth.models import Group, Permission, User

from plans.approvals import ApprovalRequested
from plans.models import Plan
from plans.services import plan_issue
from policies.services import policy_set
from teams.models import Team
from tests.admin.conftest import PASSWORD, ensure_admin_groups
from tests.conftest import POLICY, AgentPersona, make_agent, plan_document

APPROVERS = "Approvers"
TEAM_ADMINS = "Team admins"

#: the test policy, plus: deploying asks a person
REVIEW_POLICY = {
    **POLICY,
    "rules": [
        *POLICY["rules"],
        {"effect": "review", "tools": ["deploy"], "description": "deploys need a person"},
    ],
}
DEPLOY_PLAN_STEPS = [
    {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}},
    {"tool": "deploy", "args": {"env": {"in": ["staging", "prod"]}}, "maxCalls": 1},
]


def ensure_groups() -> None:
    """The groups come from data migrations; a transactional test's flush removes them."""
    ensure_admin_groups()
    importlib.import_module("notify.migrations.0002_approvers_group").grant(Group, Permission)
    importlib.import_module("notify.migrations.0005_alert_permissions").grant(Group, Permission)


@pytest.fixture(autouse=True)
def approval_groups(db) -> None:
    ensure_groups()


def make_person(username: str, email: str, *, group: str | None, teams: list[Team]) -> User:
    user = User.objects.create_user(username, email, PASSWORD, is_staff=True)
    if group:
        user.groups.add(Group.objects.get(name=group))
    for team in teams:
        team.staff.add(user)
    return user


@pytest.fixture
def review_agent(team, member) -> AgentPersona:
    version = policy_set(team=team, slug="reviewed", document=REVIEW_POLICY)
    return make_agent(team, "deployer", version)


def request_approval(persona: AgentPersona, *, user: str = "alice@acme.dev") -> Plan:
    """A plan that waits for a person, declared through the issuing service."""
    answer = plan_issue(
        agent=persona.agent,
        document=plan_document(goal="Deploy the fix", user=user, steps=DEPLOY_PLAN_STEPS),
    )
    assert isinstance(answer, ApprovalRequested), answer
    return answer.plan


@pytest.fixture
def approver(team) -> User:
    return make_person("april", "april@acme.dev", group=APPROVERS, teams=[team])


@pytest.fixture
def other_team_approver(other_team) -> User:
    return make_person("oscar", "oscar@globex.test", group=APPROVERS, teams=[other_team])


@pytest.fixture
def alice_approver(team, member) -> User:
    """An approver who is also the member the plans act for (alice@acme.dev)."""
    return make_person("alice", "Alice@Acme.dev", group=APPROVERS, teams=[team])


@pytest.fixture
def other_review_agent(other_team, outsider) -> AgentPersona:
    version = policy_set(team=other_team, slug="reviewed", document=REVIEW_POLICY)
    return make_agent(other_team, "globex-deployer", version)


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A real HTTP server on 127.0.0.1 that answers the statuses it is given, in order
    (then 200), and keeps what it received."""

    statuses: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                state.received.append(Received(dict(self.headers.items()), body))
                status = state.statuses.pop(0) if state.statuses else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/plangate"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def eager_tasks() -> Iterator[None]:
    """Queued tasks run at once in this process (the real-worker test is separate)."""
    from controlplane.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = previous
