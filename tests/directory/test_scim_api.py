"""/scim/v2 as an identity provider drives it: users and groups created, found by filter,
patched, replaced and deleted; a deactivation disables the member and stops their running
plans; the token's team only; bad input a SCIM error that writes nothing."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from audit.models import AuditRecord
from directory.models import ScimToken
from directory.tokens import scim_token_create, scim_token_revoke
from members.models import Member
from teams.models import Group
from tests.conftest import plan_document
from tests.plans.test_status_feed import feed

pytestmark = pytest.mark.django_db

SCIM = "application/scim+json"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"


class Scim:
    def __init__(self, token: str) -> None:
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def call(self, method: str, path: str, body: object = None, **query):
        kwargs = {} if body is None else {"data": json.dumps(body), "content_type": SCIM}
        if query:
            path += "?" + "&".join(f"{key}={value}" for key, value in query.items())
        return getattr(self.client, method)(f"/scim/v2{path}", **kwargs)


@pytest.fixture
def scim(team) -> Scim:
    return Scim(scim_token_create(team=team, name="Okta")[1])


def user(email: str, **more) -> dict:
    return {"schemas": [USER], "userName": email, "active": True, **more}


def error(response, status: int, scim_type: str | None = None) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == SCIM
    body = response.json()
    assert body["schemas"] == [ERROR] and body["status"] == str(status)
    if scim_type is not None:
        assert body["scimType"] == scim_type
    return body


def test_a_user_is_provisioned_as_a_member_with_its_role(scim, team):
    created = scim.call(
        "post",
        "/Users",
        user(
            "Bob@Acme.dev",
            name={"givenName": "Bob", "familyName": "Stone"},
            externalId="00u1",
            roles=[{"value": "sre", "primary": True}],
            title="Engineer",
        ),
    )
    assert created.status_code == 201, created.content
    assert created["Content-Type"] == SCIM
    body = created.json()
    assert created["Location"] == body["meta"]["location"]
    member = Member.objects.get(pk=int(body["id"]))
    assert (member.team, member.email, member.name, member.role.name, member.is_active) == (
        team,
        "bob@acme.dev",
        "Bob Stone",
        "sre",
        True,
    )
    assert body["userName"] == "Bob@Acme.dev" and body["externalId"] == "00u1"
    assert body["title"] == "Engineer"  # kept as sent, though Plangate has no column for it
    record = AuditRecord.objects.filter(team=team, details__object="member").order_by("id").last()
    assert record.actor == f"SCIM token {ScimToken.objects.get().prefix} (Okta)"


def test_users_are_found_by_filter_and_paged(scim, team):
    for number in range(3):
        address = f"p{number}@acme.dev"
        emails = [{"value": address, "primary": True}]
        scim.call("post", "/Users", user(address, externalId=f"x{number}", emails=emails))
    found = scim.call("get", "/Users", filter='userName eq "P1@acme.dev"').json()
    assert found["totalResults"] == 1 and found["Resources"][0]["externalId"] == "x1"
    by_email = scim.call("get", "/Users", filter='emails.value co "p2@" or externalId eq "x0"')
    assert by_email.json()["totalResults"] == 2
    page = scim.call("get", "/Users", startIndex=2, count=1).json()
    assert (page["totalResults"], page["startIndex"], page["itemsPerPage"]) == (3, 2, 1)
    error(scim.call("get", "/Users", filter="userName eq"), 400, "invalidFilter")


def test_deactivating_a_user_disables_the_member_and_stops_their_plans(scim, agent, member):
    declared = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json").json()
    assert feed(agent.api_key, declared["id"]).json()["status"] == "active"
    [alice] = scim.call("get", "/Users", filter='userName eq "alice@acme.dev"').json()["Resources"]

    patched = scim.call(
        "patch",
        f"/Users/{alice['id']}",
        {"schemas": [PATCH], "Operations": [{"op": "replace", "value": {"active": False}}]},
    )

    assert patched.status_code == 200 and patched.json()["active"] is False
    member.refresh_from_db()
    assert not member.is_active
    # the guard's status feed tells the running agent at its next poll (the team's bound)
    assert feed(agent.api_key, declared["id"]).json()["code"] == "user_disabled"
    refresh = agent.client.post(
        f"/v1/plans/{declared['id']}/refresh", {"token": declared["token"]}, format="json"
    )
    assert refresh.json()["code"] == "user_disabled"


def test_delete_disables_hides_and_a_new_post_brings_the_member_back(scim, member):
    [alice] = scim.call("get", "/Users", filter='userName eq "alice@acme.dev"').json()["Resources"]
    assert scim.call("delete", f"/Users/{alice['id']}").status_code == 204
    member.refresh_from_db()
    assert not member.is_active  # kept for its plans and trail
    error(scim.call("get", f"/Users/{alice['id']}"), 404)
    assert scim.call("get", "/Users").json()["totalResults"] == 0

    again = scim.call("post", "/Users", user("alice@acme.dev"))
    assert again.status_code == 201 and again.json()["id"] == alice["id"]
    member.refresh_from_db()
    assert member.is_active and list(member.groups.all()) == []


def test_put_replaces_and_a_taken_email_is_a_uniqueness_error(scim, member, sre_member):
    [alice] = scim.call("get", "/Users", filter='userName eq "alice@acme.dev"').json()["Resources"]
    replaced = scim.call(
        "put", f"/Users/{alice['id']}", user("alice@acme.dev", displayName="Alice Liddell")
    )
    assert replaced.status_code == 200 and replaced.json()["displayName"] == "Alice Liddell"
    member.refresh_from_db()
    assert member.name == "Alice Liddell" and member.role is None  # no role sent: none
    error(scim.call("post", "/Users", user("SAM@acme.dev")), 409, "uniqueness")
    taken = scim.call("put", f"/Users/{alice['id']}", user("sam@acme.dev"))
    error(taken, 409, "uniqueness")
    member.refresh_from_db()
    assert member.email == "alice@acme.dev"


def test_groups_carry_their_members(scim, team, member, sre_member):
    made = scim.call(
        "post",
        "/Groups",
        {"schemas": [GROUP], "displayName": "oncall-eu", "members": [{"value": str(member.pk)}]},
    )
    assert made.status_code == 201, made.content
    group = Group.objects.get(team=team, name="oncall-eu")
    assert list(group.members.all()) == [member]
    scim.call(
        "patch",
        f"/Groups/{group.pk}",
        {
            "schemas": [PATCH],
            "Operations": [
                {"op": "add", "path": "members", "value": [{"value": str(sre_member.pk)}]},
                {"op": "remove", "path": f'members[value eq "{member.pk}"]'},
                {"op": "replace", "path": "displayName", "value": "pager"},
            ],
        },
    )
    group.refresh_from_db()
    assert group.name == "pager" and list(group.members.all()) == [sre_member]
    served = scim.call("get", f"/Users/{sre_member.pk}").json()
    assert {entry["display"] for entry in served["groups"]} == {"oncall", "pager", "platform"}
    assert scim.call("delete", f"/Groups/{group.pk}").status_code == 204
    assert not Group.objects.filter(pk=group.pk).exists()
    assert sre_member.groups.filter(name="pager").count() == 0


def test_bad_input_is_a_scim_error_and_writes_nothing(scim, team, member):
    before = (Member.objects.count(), AuditRecord.objects.count())
    error(scim.call("post", "/Users", user("not-an-address")), 400, "invalidValue")
    error(scim.call("post", "/Users", {"schemas": [USER], "userName": "x@acme.dev"}), 400)
    error(scim.call("post", "/Users", user("y@acme.dev", active="maybe")), 400)
    bad_json = scim.client.post("/scim/v2/Users", data="{", content_type=SCIM)
    error(bad_json, 400, "invalidSyntax")
    error(scim.call("post", "/Users", [1, 2]), 400, "invalidSyntax")
    unknown_member = {"schemas": [GROUP], "displayName": "g", "members": [{"value": "999999"}]}
    error(scim.call("post", "/Groups", unknown_member), 400, "invalidValue")
    error(scim.call("patch", f"/Users/{member.pk}", {"schemas": [PATCH], "Operations": [{}]}), 400)
    error(scim.call("get", "/Users/abc"), 404)
    error(scim.call("get", "/Nope"), 404)
    error(scim.call("put", "/ServiceProviderConfig", {}), 405)
    assert (Member.objects.count(), AuditRecord.objects.count()) == before
    assert not Group.objects.filter(name="g").exists()


def test_tokens_another_teams_and_revoked(team, other_team, member, outsider):
    error(Client().get("/scim/v2/Users"), 401)
    theirs = Scim(scim_token_create(team=other_team)[1])
    listed = theirs.call("get", "/Users").json()
    assert [row["userName"] for row in listed["Resources"]] == ["olga@globex.test"]
    error(theirs.call("get", f"/Users/{member.pk}"), 404)
    token, plaintext = scim_token_create(team=team)
    scim_token_revoke(token=token)
    revoked = Scim(plaintext).call("get", "/Users")
    error(revoked, 401)
    assert revoked["WWW-Authenticate"].startswith("Bearer")


def test_discovery_documents(scim):
    config = scim.call("get", "/ServiceProviderConfig").json()
    assert config["patch"]["supported"] is True and config["bulk"]["supported"] is False
    types = scim.call("get", "/ResourceTypes").json()
    assert {row["id"] for row in types["Resources"]} == {"User", "Group"}
    schema = scim.call("get", f"/Schemas/{USER}").json()
    active = next(item for item in schema["attributes"] if item["name"] == "active")
    assert active["required"] is True


def test_the_command_prints_a_token(team):
    out = StringIO()
    call_command("create_scim_token", "--team", team.slug, "--name", "Entra", stdout=out)
    plaintext = json.loads(out.getvalue().strip().splitlines()[-1])["token"]
    assert plaintext.startswith("pgs_")
    assert Scim(plaintext).call("get", "/Users").status_code == 200
