"""What the framework adapters' tests share: the plans they declare, and a `Guard` or an
`AsyncGuard` against the live control plane for each test (`make_guard`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
from django.conf import settings

from guard.agent import AsyncGuard, Guard
from tests.conftest import plan_document

REPO = "acme/public-app"
PLAN = plan_document(
    steps=[
        {"tool": "github_list_issues", "args": {"repo": {"eq": REPO}}, "maxCalls": 2},
        {"tool": "github_get_issue", "args": {"repo": {"eq": REPO}}, "maxCalls": 3},
    ]
)
# The policy of tests.plans.approval_helpers.REVIEW_POLICY sends it to a person.
REVIEWED_PLAN = plan_document(
    steps=[{"tool": "send_email", "args": {"to": {"eq": "bob@example.test"}}}]
)

GuardFactory = Callable[[], Guard | AsyncGuard]


@pytest.fixture(params=["sync", "async"])
def make_guard(request, live_server, agent) -> Iterator[GuardFactory]:
    """A `Guard` or an `AsyncGuard` against the live server, with the guard's own wait for
    approval (300 s): a plan a person must approve still pauses the run at once."""
    guards: list[Guard | AsyncGuard] = []
    kind = Guard if request.param == "sync" else AsyncGuard

    def make() -> Guard | AsyncGuard:
        guard = kind(live_server.url, agent.api_key, issuer=settings.PLANGATE_ISSUER, report=False)
        guards.append(guard)
        return guard

    yield make
    for guard in guards:
        if isinstance(guard, AsyncGuard):
            asyncio.run(guard.aclose())
        else:
            guard.close()
