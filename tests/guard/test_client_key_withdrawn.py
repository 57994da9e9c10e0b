"""A signing key that leaves the JWKS (revoked by an admin) stops the tokens it signed:
when the guard's cached key set is refetched at its max-age and the token's kid is gone,
the guard refreshes at once; when that fails, calls are blocked as token_invalid."""

from __future__ import annotations

import httpx
from django.utils import timezone

from guard.decisions import Decision
from plans.keys import signing_key_create, signing_key_revoke
from plans.models import PlanToken, SigningKey
from tests.conftest import plan_document

from .client_helpers import json_response, wait_until

REPO = {"repo": "acme/public-app"}
PAST_MAX_AGE = 301  # PLANGATE_JWKS_MAX_AGE is 300 s


def token_kinds(plan_id: str) -> list[str]:
    return list(
        PlanToken.objects.filter(plan_id=plan_id).order_by("id").values_list("kind", flat=True)
    )


def test_a_revoked_signing_key_blocks_its_token_as_token_invalid(
    make_any_guard, clock, switchboard
):
    guard = make_any_guard()
    declared = guard.declare(plan_document())
    assert guard.check("github_list_issues", REPO).allowed
    kid = PlanToken.objects.get(plan_id=declared.plan_id).kid

    signing_key_revoke(kid=kid)
    clock.advance(30)  # within the key set's max-age: nothing is asked yet
    not_yet = guard.refresh_if_due()
    still = guard.check("github_list_issues", REPO)
    clock.advance(PAST_MAX_AGE - 30)
    refreshed = guard.refresh_if_due()
    decision = guard.check("github_list_issues", REPO)

    assert not_yet is False and still.allowed
    assert refreshed is False
    # The control plane refuses to refresh a token whose key it revoked: final.
    assert switchboard.count("/refresh") == 1
    assert decision.code == Decision.TOKEN_INVALID
    assert kid in decision.reason
    status = guard.status()
    assert (status.state, status.blocked) == ("blocked", Decision.TOKEN_INVALID)
    assert token_kinds(declared.plan_id) == ["issue"]


def test_a_key_gone_from_the_key_set_is_replaced_by_an_immediate_refresh(
    make_any_guard, clock, switchboard
):
    guard = make_any_guard()
    declared = guard.declare(plan_document())
    old_kid = PlanToken.objects.get(plan_id=declared.plan_id).kid
    # A new key signs; the old one is retired, and a proxy drops it from the key set.
    SigningKey.objects.filter(kid=old_kid).update(
        state=SigningKey.State.RETIRED, retired_at=timezone.now()
    )
    fresh = signing_key_create(state=SigningKey.State.ACTIVE)

    def drop_old_key(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.path == "/v1/keys/jwks" and response.status_code == 200:
            document = response.json()
            document["keys"] = [key for key in document["keys"] if key["kid"] != old_kid]
            return json_response(200, document)
        return response

    switchboard.rewrite = drop_old_key
    clock.advance(PAST_MAX_AGE)  # long before the token's own refresh margin (780 s)

    refreshed = guard.refresh_if_due()

    assert refreshed is True
    assert token_kinds(declared.plan_id) == ["issue", "refresh"]
    assert PlanToken.objects.order_by("id").last().kid == fresh.kid
    assert guard.check("github_list_issues", REPO).allowed
    assert guard.status().state == "active"


def test_the_background_refresher_notices_a_revoked_key_by_itself(live_any_guard, settings):
    settings.PLANGATE_JWKS_MAX_AGE = 1
    guard = live_any_guard(report=False, jwks_min_refetch_interval=0.5)
    declared = guard.declare(plan_document())
    assert guard.check("github_list_issues", REPO).allowed

    signing_key_revoke(kid=PlanToken.objects.get(plan_id=declared.plan_id).kid)

    # Calls are token_invalid from the moment the key is found missing; the refused
    # refresh that follows makes it final.
    assert wait_until(lambda: guard.status().blocked == Decision.TOKEN_INVALID)
    assert guard.check("github_list_issues", REPO).code == Decision.TOKEN_INVALID
