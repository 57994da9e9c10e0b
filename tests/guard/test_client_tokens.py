"""The guard trusts a token only when it is validly signed for exactly the plan it sent.

A tampering proxy (`reissuing`) sits between the guard and the real control plane: it
re-signs each token with a key the test controls after changing its claims, and, to play an
attacker who controls the key set too, adds that key to the JWKS. Only the plan checks can
then catch the swap.
"""

from __future__ import annotations

import time

import httpx
import jwt
import pytest
from django.conf import settings
from django.utils import timezone

from guard.agent.errors import PLAN_SWAPPED, TOKEN_INVALID, GuardError
from guard.decisions import Decision
from guard.plan import plan_hash, validate_plan
from plans.keys import signing_key_create
from plans.models import PlanToken, SigningKey
from tests.conftest import plan_document

from .client_helpers import TestSigner, reissuing

REPO = {"repo": "acme/public-app"}
WIDER = plan_document(steps=[{"tool": "github_delete_repo"}, {"tool": "send_email"}])


def unchanged(claims, body):
    pass


def swap_plan_and_hash(claims, body):
    claims["plan"] = validate_plan(WIDER)
    claims["ph"] = body["planHash"] = plan_hash(claims["plan"])


def swap_plan_keep_hash(claims, body):
    claims["plan"] = validate_plan(WIDER)


def swap_hash_keep_plan(claims, body):
    claims["ph"] = body["planHash"] = plan_hash(validate_plan(WIDER))


def widen_a_step(claims, body):
    claims["plan"]["steps"][0]["maxCalls"] = 1000


def another_person(claims, body):
    claims["sub"] = "sam@acme.dev"


def another_plan_id(claims, body):
    claims["jti"] = "01J00000000000000000000000"


def test_the_tampering_proxy_itself_passes_an_unchanged_token(make_any_guard, switchboard):
    switchboard.rewrite = reissuing(TestSigner(), unchanged)
    guard = make_any_guard()

    guard.declare(plan_document())

    assert guard.check("github_list_issues", REPO).allowed


@pytest.mark.parametrize(
    "swap",
    [
        swap_plan_and_hash,
        swap_plan_keep_hash,
        swap_hash_keep_plan,
        widen_a_step,
        another_person,
        another_plan_id,
    ],
)
def test_a_validly_signed_token_for_another_plan_is_refused(make_any_guard, switchboard, swap):
    switchboard.rewrite = reissuing(TestSigner(), swap)
    guard = make_any_guard()

    with pytest.raises(GuardError) as refused:
        guard.declare(plan_document())

    assert refused.value.code == PLAN_SWAPPED
    assert guard.check("github_delete_repo", {}).code == Decision.NO_PLAN
    assert guard.status().state == "no_plan"


def expired(claims, body):
    claims["iat"] = int(time.time()) - 3600
    claims["exp"] = int(time.time()) - 600


def other_issuer(claims, body):
    claims["iss"] = "https://evil.example"


def mistyped_role(claims, body):
    claims["role"] = ["admin"]


def mistyped_groups(claims, body):
    claims["groups"] = ["ops", 7]


def policy_version_as_text(claims, body):
    claims["polv"] = "3"


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (expired, "token expired"),
        (other_issuer, "wrong issuer"),
        # The claims' types are checked once, by IntentClaims, for the server and the guard.
        (mistyped_role, "claim role is not a string or null"),
        (mistyped_groups, "claim groups is not a list of strings"),
        (policy_version_as_text, "claim polv is not an integer"),
    ],
)
def test_a_token_failing_verification_is_refused(make_any_guard, switchboard, edit, reason):
    switchboard.rewrite = reissuing(TestSigner(), edit)
    guard = make_any_guard()

    with pytest.raises(GuardError) as refused:
        guard.declare(plan_document())

    assert refused.value.code == TOKEN_INVALID
    assert reason in refused.value.message


def test_a_token_signed_with_another_algorithm_is_refused(make_any_guard, switchboard):
    signer = TestSigner()
    hmac_token = lambda claims: jwt.encode(  # noqa: E731
        claims, "k" * 32, algorithm="HS256", headers={"kid": signer.kid}
    )
    switchboard.rewrite = reissuing(signer, unchanged, sign=hmac_token)
    guard = make_any_guard()

    with pytest.raises(GuardError) as refused:
        guard.declare(plan_document())

    assert refused.value.code == TOKEN_INVALID
    assert "algorithm HS256 is not accepted" in refused.value.message


def test_a_token_signed_by_a_key_outside_the_jwks_is_refused(make_any_guard, switchboard):
    switchboard.rewrite = reissuing(TestSigner(), unchanged, publish_key=False)
    guard = make_any_guard()

    with pytest.raises(GuardError) as refused:
        guard.declare(plan_document())

    assert refused.value.code == TOKEN_INVALID
    assert "unknown key id" in refused.value.message


def test_a_swapped_token_at_refresh_keeps_the_valid_one(make_any_guard, switchboard):
    switchboard.rewrite = reissuing(TestSigner(), swap_plan_and_hash, only_refresh=True)
    guard = make_any_guard()
    declared = guard.declare(plan_document())

    assert guard.refresh() is False

    status = guard.status()
    assert status.plan_id == declared.plan_id
    assert status.state == "active"
    assert PLAN_SWAPPED in (status.refresh_error or "")
    assert guard.check("github_list_issues", REPO).allowed
    assert guard.check("github_delete_repo", {}).code == Decision.NOT_IN_PLAN


# --- the JWKS cache ------------------------------------------------------------------------


def test_a_key_that_started_signing_after_the_jwks_was_cached_is_fetched(
    make_any_guard, switchboard, clock
):
    guard = make_any_guard()
    guard.declare(plan_document())
    assert switchboard.count("/v1/keys/jwks") == 1
    # A key the cached JWKS has never seen starts signing (the old one stays published).
    SigningKey.objects.filter(state=SigningKey.State.ACTIVE).update(
        state=SigningKey.State.RETIRED, retired_at=timezone.now()
    )
    fresh = signing_key_create(state=SigningKey.State.ACTIVE)

    clock.advance(31)  # past the refetch interval, well within the JWKS max-age
    refreshed = guard.refresh()

    assert refreshed is True
    assert switchboard.count("/v1/keys/jwks") == 2
    assert PlanToken.objects.order_by("id").last().kid == fresh.kid
    assert guard.check("github_list_issues", REPO).allowed


def test_unknown_key_ids_refetch_the_jwks_at_most_once_per_interval(
    make_any_guard, switchboard, clock
):
    switchboard.rewrite = reissuing(TestSigner(), unchanged, publish_key=False)
    guard = make_any_guard(jwks_min_refetch_interval=30)
    fetches = []

    for advance in (0, 1, 1, 30, 1):
        clock.advance(advance)
        with pytest.raises(GuardError):
            guard.declare(plan_document())
        fetches.append(switchboard.count("/v1/keys/jwks"))

    assert fetches == [1, 1, 1, 2, 2]


# --- malformed tokens in an answer: token_invalid, never an exception of another kind -------


def non_ascii_in(segment: int, *, only_refresh: bool = False):
    """A broken proxy that puts a non-ASCII character into one segment of each token."""

    def rewrite(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        path = request.url.path
        issuing = path.endswith("/refresh") or (path == "/v1/plans" and not only_refresh)
        if request.method != "POST" or not issuing or response.status_code not in (200, 201):
            return response
        body = response.json()
        parts = body["token"].split(".")
        parts[segment] = parts[segment][:5] + "é" + parts[segment][5:]
        body["token"] = ".".join(parts)
        return httpx.Response(response.status_code, json=body)

    return rewrite


@pytest.mark.parametrize("segment", [0, 1, 2], ids=["header", "payload", "signature"])
def test_a_token_with_a_non_ascii_character_is_token_invalid_at_declare(
    make_any_guard, switchboard, segment
):
    switchboard.rewrite = non_ascii_in(segment)
    guard = make_any_guard()

    with pytest.raises(GuardError) as refused:
        guard.declare(plan_document())
    result = guard.handle_declare_plan(plan_document())

    assert refused.value.code == TOKEN_INVALID
    assert result["ok"] is False
    assert result["code"] == TOKEN_INVALID
    assert guard.status().state == "no_plan"


@pytest.mark.parametrize("segment", [0, 1, 2], ids=["header", "payload", "signature"])
def test_a_refreshed_token_with_a_non_ascii_character_never_raises_from_check(
    make_any_guard, switchboard, clock, segment
):
    guard = make_any_guard()
    guard.declare(plan_document())
    switchboard.rewrite = non_ascii_in(segment, only_refresh=True)
    clock.advance(901)  # past expiry

    decision = guard.check("github_list_issues", REPO)
    refreshed = guard.refresh()
    again = guard.check("github_list_issues", REPO)

    assert decision.code == again.code == Decision.TOKEN_EXPIRED
    assert refreshed is False
    assert TOKEN_INVALID in (guard.status().refresh_error or "")


def test_a_token_of_another_issuer_names_both_issuers_and_the_setting(make_any_guard):
    # The same control plane, spelt another way: the guard says what to configure.
    guard = make_any_guard(issuer="http://127.0.0.1:8000", bind_token=False)

    with pytest.raises(GuardError) as refused:
        guard.declare(plan_document())

    assert refused.value.code == TOKEN_INVALID
    issuer = settings.PLANGATE_ISSUER
    assert refused.value.message == (
        f'the intent token is not valid: wrong issuer: the token names "{issuer}", expected'
        f' "http://127.0.0.1:8000"; if that is your control plane, give the guard'
        f" issuer={issuer!r} (plangate-mcp: --issuer; the examples: PLANGATE_ISSUER)"
    )
