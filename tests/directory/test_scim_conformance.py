"""The SCIM service provider under an independent client: scim2-tester runs its discovery,
CRUD, PATCH, query and search checks against a live server with a team's SCIM token."""

from __future__ import annotations

import collections

import httpx2
import pytest
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_tester import Status, check_server

from directory.tokens import scim_token_create

pytestmark = pytest.mark.slow  # a live server and about two hundred requests


@pytest.fixture
def results(live_server, team):
    _, token = scim_token_create(team=team, name="scim2-tester")
    client = httpx2.Client(
        base_url=f"{live_server.url}/scim/v2",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    scim = SyncSCIMClient(client)
    scim.discover()
    # As an identity provider is set up for Plangate ("username format: e-mail"), the
    # tester fills userName with e-mail addresses: the provider's User schema says so.
    users = [model for model in scim.provider.models if model.__name__ == "User"]
    assert users, "the discovered User model"
    users[0].model_fields["user_name"].examples = [f"person{n}@example.com" for n in range(500)]
    return check_server(scim, raise_exceptions=False)


def test_scim2_tester_passes_every_check(results):
    statuses = collections.Counter(result.status for result in results)
    failed = [
        f"{result.status.name} {result.title} [{result.resource_type}]: {result.reason}"
        for result in results
        if result.status != Status.SUCCESS
    ]
    assert failed == []
    # discovery, CRUD, PATCH add/remove/replace, queries and searches for User and Group
    assert statuses[Status.SUCCESS] >= 100
    titles = {result.title for result in results}
    assert {"object_creation", "check_add_attribute", "search_with_attributes"} <= titles
