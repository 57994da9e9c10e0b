"""EqIndex narrows many steps or rules for one tool; decisions must not change by it."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from guard.constraints import compile_args
from guard.deny import compile_deny_args
from guard.eq_index import EqIndex
from guard.plan import CompiledPlan, validate_plan
from guard.policy import validate_policy
from guard.policy_evaluation import CompiledPolicy, PolicyDecision

# Values chosen to collide in every way JSON equality cares about: 1 and 1.0 are equal,
# true and 1 are not, "1" is a string.
pinned_values = st.sampled_from(["a", "b", "1", 1, 1.0, 2, True, False, None])
call_values = pinned_values | st.sampled_from([[1], {"a": 1}, 1.5, "c", float("nan")])

pinned_patterns = st.one_of(
    st.builds(lambda value: {"repo": {"eq": value}}, pinned_values),
    st.builds(
        lambda value, limit: {"repo": {"eq": value}, "n": {"lte": limit}},
        pinned_values,
        st.integers(0, 3),
    ),
)
args_patterns = st.one_of(
    pinned_patterns,
    st.just({"repo": {"glob": "a*"}}),
    st.just({"repo": {"in": [1, "b"]}}),
    st.just({"other": {"eq": "x"}}),
    st.just({}),
)
# At least half the patterns pin `repo` with `eq`, so the index is built (and shuffled, so
# the pinned ones are not all first).
indexed_patterns = st.tuples(
    st.lists(pinned_patterns, min_size=8, max_size=20), st.lists(args_patterns, max_size=8)
).flatmap(lambda lists: st.permutations(lists[0] + lists[1]))
any_patterns = indexed_patterns | st.lists(args_patterns, min_size=1, max_size=20)

calls = st.one_of(
    st.dictionaries(
        st.sampled_from(["repo", "n", "other"]),
        call_values | st.integers(0, 4),
        max_size=3,
    ),
    st.just([]),
    st.just("repo"),
)


# Three times the profile: the index must never change a decision; examples are cheap.
@settings(max_examples=3 * settings.default.max_examples)
@given(patterns=any_patterns, call=calls)
def test_a_plan_matches_the_same_steps_with_and_without_the_index(patterns, call):
    plan = validate_plan(
        {
            "version": 1,
            "goal": "g",
            "user": "a@b.co",
            "steps": [{"tool": "t", "args": args} for args in patterns],
        }
    )
    expected = [index for index, args in enumerate(patterns) if compile_args(args)(call)]

    assert CompiledPlan(plan).matching_steps("t", call) == expected


def naive_decision(rules: list[dict[str, Any]], call: Any, default: str) -> tuple[bool, int | None]:
    for effect in ("deny", "allow"):
        compile_rule = compile_deny_args if effect == "deny" else compile_args
        for index, rule in enumerate(rules):
            if rule["effect"] == effect and compile_rule(rule.get("args", {}))(call):
                return effect == "allow", index
    return default == "allow", None


# Three times the profile: the index must never change a decision; examples are cheap.
@settings(max_examples=3 * settings.default.max_examples)
@given(
    patterns=any_patterns.flatmap(
        lambda args: st.tuples(
            *(st.tuples(st.sampled_from(["allow", "deny"]), st.just(a)) for a in args)
        )
    ),
    default=st.sampled_from(["allow", "deny"]),
    call=calls,
)
def test_a_policy_decides_the_same_with_and_without_the_index(patterns, default, call):
    rules = [
        {"effect": effect, "tools": ["t"], **({"args": args} if args else {})}
        for effect, args in patterns
    ]
    policy = validate_policy({"version": 1, "default": default, "rules": rules})

    decision: PolicyDecision = CompiledPolicy(policy, role=None, groups=()).decide("t", call)

    assert (decision.allowed, decision.rule) == naive_decision(rules, call, default)


def test_the_index_is_built_only_where_it_helps():
    pinned = [(index, {"repo": {"eq": f"r{index}"}}) for index in range(10)]

    assert EqIndex.build(pinned[:7]) is None  # too few to be worth it
    assert EqIndex.build([(index, {"repo": {"glob": "*"}}) for index in range(10)]) is None
    index = EqIndex.build(pinned)
    assert index is not None
    assert index.candidates({"repo": "r3"}) == (3,)
    assert index.candidates({"repo": "nope"}) == ()
    assert index.candidates({"other": 1}) == ()
    assert index.candidates("not an object") == ()


def test_a_fail_closed_index_skips_only_rules_the_value_is_provably_outside():
    pinned = [(index, {"repo": {"eq": f"r{index}"}}) for index in range(8)]
    pinned += [(8, {"repo": {"eq": 5}}), (9, {"repo": {"glob": "*"}})]

    index = EqIndex.build(pinned, fail_closed=True)

    assert index is not None
    assert index.candidates({"repo": "r3"}) == (3, 8, 9)  # 8: a number is not comparable
    assert index.candidates({"repo": "nope"}) == (8, 9)
    assert index.candidates({"repo": 5.0}) == tuple(range(10))  # every string rule stays
    assert index.candidates({"repo": 6}) == (*range(8), 9)
    everything = tuple(range(10))
    for call in ({}, {"repo": ["r3"]}, {"repo": float("nan")}, {"repo": "r\ud800"}, "x"):
        assert index.candidates(call) == everything
