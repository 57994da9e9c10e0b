"""Random JSON, near-miss SCIM documents and odd query strings at /scim/v2: never a 5xx,
every refusal a SCIM Error document, and a refused write leaves the team as it was."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from audit.models import AuditRecord
from directory.tokens import scim_token_create
from members.models import Member
from teams.models import Group

from .test_random_bodies import FUZZ_SETTINGS, json_values, mostly

SCIM = "application/scim+json"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"

names = mostly(st.sampled_from(["bob@acme.dev", "alice@acme.dev", "x@y.z"]), st.text(max_size=12))
users = st.fixed_dictionaries(
    {"schemas": mostly(st.just([USER]), json_values)},
    optional={
        "userName": mostly(names, json_values),
        "active": mostly(st.booleans(), json_values),
        "emails": mostly(st.just([{"value": "bob@acme.dev", "primary": True}]), json_values),
        "roles": mostly(st.just([{"value": "sre"}]), json_values),
        "name": json_values,
    },
)
operations = st.lists(
    st.fixed_dictionaries(
        {"op": mostly(st.sampled_from(["add", "replace", "remove"]), json_values)},
        optional={
            "path": mostly(
                st.sampled_from(["active", "members", 'members[value eq "1"]', "name.formatted"]),
                json_values,
            ),
            "value": json_values,
        },
    ),
    max_size=3,
)
patches = st.fixed_dictionaries(
    {
        "schemas": mostly(st.just([PATCH]), json_values),
        "Operations": mostly(operations, json_values),
    }
)
filters = mostly(
    st.sampled_from(['userName eq "alice@acme.dev"', 'emails[type eq "work"]', "active pr"]),
    st.text(max_size=20),
)


@pytest.fixture
def scim(team, member):
    return Client(HTTP_AUTHORIZATION=f"Bearer {scim_token_create(team=team)[1]}")


def state() -> tuple:
    return (
        sorted(Member.objects.values_list("email", "name", "is_active", "role__name")),
        sorted(Group.objects.values_list("name", flat=True)),
        AuditRecord.objects.count(),
    )


def assert_answer(response, before: tuple) -> None:
    assert response.status_code < 500, response.content[:300]
    if response.status_code >= 400:
        body = response.json()
        assert body["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"]
        assert body["status"] == str(response.status_code)
        assert state() == before


@FUZZ_SETTINGS
@given(body=mostly(users, json_values), method=st.sampled_from(["post", "put"]))
def test_random_users(scim, member, body, method):
    before = state()
    path = "/scim/v2/Users" if method == "post" else f"/scim/v2/Users/{member.pk}"
    response = getattr(scim, method)(path, data=json.dumps(body), content_type=SCIM)
    assert_answer(response, before)


@FUZZ_SETTINGS
@given(body=mostly(patches, json_values), resource=st.sampled_from(["Users", "Groups"]))
def test_random_patches(scim, member, body, resource):
    group = Group.objects.get_or_create(team=member.team, name="platform")[0]
    target = member.pk if resource == "Users" else group.pk
    before = state()
    response = scim.patch(f"/scim/v2/{resource}/{target}", data=json.dumps(body), content_type=SCIM)
    assert_answer(response, before)


@FUZZ_SETTINGS
@given(
    query=st.dictionaries(
        st.sampled_from(["filter", "startIndex", "count", "attributes", "excludedAttributes"]),
        mostly(filters, st.text(max_size=12)),
        max_size=3,
    ),
    resource=st.sampled_from(["Users", "Groups"]),
)
def test_random_queries(scim, query, resource):
    before = state()
    assert_answer(scim.get(f"/scim/v2/{resource}", query), before)
