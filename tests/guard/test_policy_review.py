"""Review rules: validation, which plan steps they send to a person (with deny and allow
around them, roles and groups, args, maxCalls), call-time decisions, and the `apr` claim."""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.claims import Approval, IntentClaims, approval_claim
from guard.errors import DocumentInvalid, TokenInvalid
from guard.plan import validate_plan
from guard.policy import validate_policy
from guard.policy_evaluation import CompiledPolicy, evaluate_plan
from guard.policy_review import StepReview, approval_verify, plan_reviews, review_covers

from .strategies import group_names, policies, role_names


def policy(*rules: dict[str, Any], default: str = "deny") -> dict[str, Any]:
    return validate_policy({"version": 1, "default": default, "rules": list(rules)})


def plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return validate_plan({"version": 1, "goal": "g", "user": "a@b.c", "steps": list(steps)})


def reviewed_steps(policy_document, plan_document, role=None, groups=()) -> list[int]:
    return [
        review.step
        for review in plan_reviews(policy_document, plan_document, role=role, groups=groups)
    ]


ALLOW_READS = {"effect": "allow", "tools": ["read_*"]}
REVIEW_MAIL = {"effect": "review", "tools": ["send_*"], "name": "outgoing mail"}


def test_a_review_rule_validates_and_the_default_still_may_not_be_review():
    assert validate_policy(policy(REVIEW_MAIL))["rules"][0]["effect"] == "review"
    with pytest.raises(DocumentInvalid) as excinfo:
        validate_policy({"version": 1, "default": "review", "rules": []})
    assert [error.path for error in excinfo.value.errors] == ["default"]
    with pytest.raises(DocumentInvalid) as excinfo:
        validate_policy(
            {"version": 1, "default": "deny", "rules": [{"effect": "ask", "tools": ["a"]}]}
        )
    assert [error.path for error in excinfo.value.errors] == ["rules[0].effect"]
    assert "review" in excinfo.value.errors[0].detail


def test_a_review_rule_admits_the_step_and_asks_a_person():
    document = policy(ALLOW_READS, REVIEW_MAIL)
    steps = plan({"tool": "read_inbox"}, {"tool": "send_mail"})

    assert evaluate_plan(document, steps, role=None, groups=()) == []
    assert plan_reviews(document, steps, role=None, groups=()) == [
        StepReview(1, "send_mail", 1, 'review "outgoing mail" (rules[1])')
    ]


def test_a_plan_whose_steps_are_all_allowed_needs_nobody():
    document = policy(ALLOW_READS, REVIEW_MAIL)

    assert reviewed_steps(document, plan({"tool": "read_inbox"}, {"tool": "read_calendar"})) == []


def test_deny_wins_over_review_and_refused_steps_ask_nothing():
    document = policy(REVIEW_MAIL, {"effect": "deny", "tools": ["send_sms"]})
    steps = plan({"tool": "send_sms"}, {"tool": "send_mail"})

    denials = evaluate_plan(document, steps, role=None, groups=())
    assert [denial.step for denial in denials] == [0]
    assert reviewed_steps(document, steps) == [1]


def test_review_wins_over_an_allow_of_the_same_tool_in_either_order():
    for rules in (
        (ALLOW_READS, {"effect": "review", "tools": ["read_payroll"]}),
        ({"effect": "review", "tools": ["read_payroll"]}, ALLOW_READS),
    ):
        document = policy(*rules)
        assert reviewed_steps(document, plan({"tool": "read_inbox"}, {"tool": "read_payroll"})) == [
            1
        ]


def test_review_rules_are_scoped_by_roles_and_groups():
    document = policy(
        ALLOW_READS,
        {"effect": "review", "tools": ["read_*"], "roles": ["intern"]},
        {"effect": "review", "tools": ["read_payroll"], "groups": ["contractors"]},
    )
    steps = plan({"tool": "read_inbox"}, {"tool": "read_payroll"})

    assert reviewed_steps(document, steps, role="intern") == [0, 1]
    assert reviewed_steps(document, steps, role="engineer", groups=["contractors"]) == [1]
    assert reviewed_steps(document, steps, role="engineer", groups=["staff"]) == []


def test_a_review_rule_alone_does_not_admit_what_its_scope_leaves_out():
    document = policy({"effect": "review", "tools": ["deploy"], "roles": ["sre"]})
    steps = plan({"tool": "deploy"})

    assert evaluate_plan(document, steps, role="sre", groups=()) == []
    assert [d.step for d in evaluate_plan(document, steps, role="engineer", groups=())] == [0]
    assert reviewed_steps(document, steps, role="engineer") == []


def test_max_calls_on_a_review_rule_caps_the_step_as_an_allow_does():
    document = policy({"effect": "review", "tools": ["deploy"], "maxCalls": 3})

    refused = evaluate_plan(document, plan({"tool": "deploy", "maxCalls": 4}), role=None, groups=())
    assert [(denial.step, denial.rule) for denial in refused] == [(0, 0)]
    assert "limit of 3" in refused[0].reason
    assert reviewed_steps(document, plan({"tool": "deploy", "maxCalls": 4})) == []
    assert reviewed_steps(document, plan({"tool": "deploy", "maxCalls": 3})) == [0]


def test_a_review_rule_with_args_is_passed_over_only_for_a_step_pinned_outside_it():
    document = policy(
        {"effect": "allow", "tools": ["send_mail"]},
        {"effect": "review", "tools": ["send_mail"], "args": {"to": {"glob": "*@outside.test"}}},
    )

    inside = plan({"tool": "send_mail", "args": {"to": {"eq": "bob@acme.dev"}}})
    outside = plan({"tool": "send_mail", "args": {"to": {"eq": "eve@outside.test"}}})
    free = plan({"tool": "send_mail"})
    loose = plan({"tool": "send_mail", "args": {"to": {"glob": "*"}}})
    assert reviewed_steps(document, inside) == []
    assert reviewed_steps(document, outside) == [0]
    # A step leaving the argument free may send to anyone: a person looks at it.
    assert reviewed_steps(document, free) == [0]
    assert reviewed_steps(document, loose) == [0]


def test_at_call_time_a_review_rule_admits_like_an_allow():
    compiled = CompiledPolicy(policy(REVIEW_MAIL, default="deny"), role=None, groups=())

    decision = compiled.decide("send_mail", {"to": "bob@acme.dev"})
    assert decision.allowed and decision.rule == 0
    assert not compiled.decide("delete_mail", {}).allowed


@given(st.lists(st.integers(0, 9), max_size=10), st.lists(st.integers(0, 9), max_size=10))
def test_an_approval_covers_the_same_steps_or_fewer(approved, asked):
    reviews = [StepReview(step, "t", 0, "") for step in asked]
    assert review_covers(approved, reviews) == set(asked).issubset(approved)


# --- the apr claim ---------------------------------------------------------------------------

PH = "a" * 64


def claims(**overrides: Any) -> IntentClaims:
    values: dict[str, Any] = {
        "iss": "https://plangate.test",
        "sub": "alice@acme.dev",
        "jti": "01JAAAAAAAAAAAAAAAAAAAAAAA",
        "iat": 1,
        "exp": 2,
        "ph": PH,
        "plan": plan({"tool": "send_mail"}),
        "agent": "01JBBBBBBBBBBBBBBBBBBBBBBB",
        "pol": policy(REVIEW_MAIL),
        "polv": 1,
        "polh": "b" * 64,
        "role": None,
        "groups": (),
        **overrides,
    }
    return IntentClaims(**values)


def test_apr_round_trips_through_the_payload_and_is_left_out_when_absent():
    approved = claims(apr=Approval(by="carol@acme.dev", at=1700000000, ph=PH))

    payload = approved.to_payload()
    assert payload["apr"] == {"by": "carol@acme.dev", "at": 1700000000, "ph": PH}
    assert IntentClaims.from_payload(payload) == approved
    assert "apr" not in claims().to_payload()
    assert IntentClaims.from_payload(claims().to_payload()).apr is None


@pytest.mark.parametrize(
    "apr",
    [
        {"by": "carol@acme.dev", "at": 1, "ph": "b" * 64},  # another plan's approval
        {"by": "carol@acme.dev", "at": 1},
        {"by": "carol@acme.dev", "at": 1, "ph": PH, "extra": 1},
        {"by": 5, "at": 1, "ph": PH},
        {"by": "carol@acme.dev", "at": True, "ph": PH},
        {"by": "carol@acme.dev", "at": "1", "ph": PH},
        "carol@acme.dev",
        None,
    ],
)
def test_a_malformed_apr_or_one_for_another_plan_hash_is_refused(apr):
    payload = {**claims().to_payload(), "apr": apr}

    with pytest.raises(TokenInvalid):
        IntentClaims.from_payload(payload)
    with pytest.raises(TokenInvalid):
        approval_claim(payload)


def test_a_token_whose_policy_asks_review_must_carry_apr():
    with pytest.raises(TokenInvalid, match="apr is missing"):
        approval_verify(claims())
    approval_verify(claims(apr=Approval(by="carol@acme.dev", at=1, ph=PH)))
    # Nothing under review: no approval needed.
    approval_verify(claims(pol=policy({"effect": "allow", "tools": ["send_*"]})))


@given(policies(), st.none() | role_names, st.lists(group_names, max_size=2), st.data())
def test_at_issuance_review_is_allow_plus_a_person(document, role, groups, data):
    """Whatever the policy: a review rule refuses and caps exactly as an allow rule would,
    and only admitted steps that a review rule concerns are sent to a person."""
    normalised = validate_policy(document)
    tools = data.draw(st.lists(st.sampled_from(["a", "b", "ab", "a_b", "_"]), min_size=1))
    steps = plan(*({"tool": tool, "maxCalls": data.draw(st.integers(1, 30))} for tool in tools))
    as_allow = {
        **normalised,
        "rules": [
            {**rule, "effect": "allow" if rule["effect"] == "review" else rule["effect"]}
            for rule in normalised["rules"]
        ],
    }

    denials = evaluate_plan(normalised, steps, role=role, groups=groups)
    assert denials == evaluate_plan(as_allow, steps, role=role, groups=groups)
    reviews = plan_reviews(normalised, steps, role=role, groups=groups)
    assert not {review.step for review in reviews} & {denial.step for denial in denials}
    for review in reviews:
        rule = normalised["rules"][review.rule]
        assert rule["effect"] == "review"
        assert (
            fnmatch.fnmatchcase(review.tool, rule["tools"][0])
            or len(rule["tools"]) > 1
            or ("[" in rule["tools"][0])
        )
    assert plan_reviews(as_allow, steps, role=role, groups=groups) == []
