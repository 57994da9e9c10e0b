"""Child plans and key binding (docs/decisions/0069, 0070): a bound parent delegates only
with a proof by its key; the child is bound to the receiving guard's key when the request
names it (`jkt`), never to the parent's proof; a team that binds every token requires it."""

from __future__ import annotations

import pytest

from guard.dpop import DpopKey
from kernel.problems import Code
from plans.models import Plan
from tests.conftest import plan_document

from .helpers import assert_problem, claims_of
from .test_delegation_api import REPO, errors, written
from .test_dpop_api import declare, proof, refresh

ONE = [{"tool": "github_list_issues", "args": REPO, "maxCalls": 1}]


@pytest.fixture
def parent_key() -> DpopKey:
    return DpopKey.generate()


@pytest.fixture
def child_key() -> DpopKey:
    return DpopKey.generate()


def delegate(persona, parent_id: str, key: DpopKey | None = None, **body):
    path = f"/v1/plans/{parent_id}/delegations"
    extra = {"HTTP_DPOP": proof(persona, key, "POST", path)} if key else {}
    return persona.client.post(
        path, {"plan": plan_document(steps=ONE), **body}, format="json", **extra
    )


def test_a_bound_parent_delegates_only_with_a_proof_by_its_key(agent, parent_key, child_key):
    parent = declare(agent, parent_key)
    before = written()

    assert_problem(delegate(agent, parent["id"]), 401, Code.INVALID_DPOP_PROOF)
    assert_problem(delegate(agent, parent["id"], child_key), 401, Code.INVALID_DPOP_PROOF)
    assert written() == before

    response = delegate(agent, parent["id"], parent_key)
    assert response.status_code == 201, response.content
    # The parent's proof authenticates the request; it does not bind the child.
    assert "cnf" not in claims_of(response.json()["token"])
    assert Plan.objects.get(pk=response.json()["id"]).jkt == ""


def test_a_child_is_bound_to_the_key_the_request_names(agent, child_key):
    parent = declare(agent, None)

    response = delegate(agent, parent["id"], jkt=child_key.jkt)

    assert response.status_code == 201, response.content
    child = response.json()
    assert claims_of(child["token"])["cnf"] == {"jkt": child_key.jkt}
    assert_problem(refresh(agent, child), 401, Code.INVALID_DPOP_PROOF)
    path = f"/v1/plans/{child['id']}/refresh"
    assert refresh(agent, child, proof(agent, child_key, "POST", path)).status_code == 200


def test_a_malformed_jkt_is_an_invalid_request(agent):
    parent = declare(agent, None)

    response = delegate(agent, parent["id"], jkt="not a thumbprint")

    assert errors(assert_problem(response, 400, Code.INVALID_REQUEST)) == ["jkt"]


def test_a_team_that_binds_every_token_requires_the_childs_key(agent, team, parent_key, child_key):
    parent = declare(agent, parent_key)
    team.require_token_binding = True
    team.save(update_fields=["require_token_binding"])
    before = written()

    unbound = delegate(agent, parent["id"], parent_key)

    assert errors(assert_problem(unbound, 400, Code.INVALID_REQUEST)) == ["jkt"]
    assert written() == before
    bound = delegate(agent, parent["id"], parent_key, jkt=child_key.jkt)
    assert bound.status_code == 201, bound.content
