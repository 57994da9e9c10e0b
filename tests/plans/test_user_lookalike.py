"""A plan's ``user`` that matches a member only through a character that lowercases into
another one (U+212A KELVIN SIGN into ``k``) is refused as ``unknown_user``: nothing is
signed or stored, and the trail shows the refused text escaped, so no token ``sub``, plan
page or trail row ever shows a look-alike of a member's address (docs/decisions/0059)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from audit.models import AuditRecord
from kernel.problems import Code
from members.services import member_upsert
from plans.models import Plan
from tests.conftest import plan_document

from .helpers import assert_problem, claims_of, table_counts

URL = "/v1/plans"


def declare(agent, user: str):
    return agent.client.post(URL, {"plan": plan_document(user=user)}, format="json")


@pytest.mark.parametrize(
    ("stored", "given", "named"),
    [
        ("kim@acme.dev", "\u212aim@acme.dev", "U+212A KELVIN SIGN"),
        ("kim@acme.dev", "\u212aIM@ACME.DEV", "U+212A KELVIN SIGN"),
        ("ola@\u00e5re.dev", "ola@\u212bre.dev", "U+212B ANGSTROM SIGN"),
    ],
)
def test_a_user_matching_only_through_case_folding_is_refused(agent, team, stored, given, named):
    member_upsert(team=team, email=stored)
    before = table_counts()

    response = declare(agent, given)

    body = assert_problem(response, 403, Code.UNKNOWN_USER)
    assert body["errors"] == [
        {"path": "plan.user", "detail": f"{named} only looks like a letter of an address"}
    ]
    assert given not in response.content.decode()
    assert table_counts() == before
    (record,) = AuditRecord.objects.filter(kind=AuditRecord.Kind.PLAN_REFUSED)
    assert record.code == Code.UNKNOWN_USER
    assert record.user == given.encode("unicode_escape").decode()
    assert record.user.isascii() and "\\u212" in record.user
    # The trail's pages show the escaped text, never the look-alike.
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", "root@example.test", "pw-root-123"))
    for page in ("/admin/audit/auditrecord/", "/admin/audit/refusedattempt/"):
        shown = admin.get(page)
        assert shown.status_code == 200
        html = shown.content.decode()
        lookalike = next(character for character in given if not character.isascii())
        assert record.user in html and lookalike not in html


def test_a_user_in_another_case_is_still_signed_as_the_stored_address(agent, team):
    kim = member_upsert(team=team, email="kim@acme.dev")

    response = declare(agent, "KIM@Acme.Dev")

    assert response.status_code == 201, response.content
    assert claims_of(response.json()["token"])["sub"] == "kim@acme.dev"
    assert Plan.objects.get().member == kim
    (record,) = AuditRecord.objects.filter(kind=AuditRecord.Kind.PLAN_ISSUED)
    assert record.user == "kim@acme.dev"


def test_any_other_refused_user_is_recorded_in_ascii(agent):
    # A Cyrillic small a (U+0430) matches no member; the trail shows it escaped, never as
    # what looks like alice's address.
    declare(agent, "\u0430lice@acme.dev")

    (record,) = AuditRecord.objects.filter(kind=AuditRecord.Kind.PLAN_REFUSED)
    assert (record.code, record.user) == (Code.UNKNOWN_USER, "\\u0430lice@acme.dev")
