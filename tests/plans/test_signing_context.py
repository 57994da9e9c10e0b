"""plans.selectors.signing_context_read answers in one statement what the ORM answers in
four (the member with their role and groups, the policy's newest version, the active key),
and every request reads it again: a disabled member, a new policy version or a revoked key
applies at the very next request of the same process."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase

from guard.tokens import unverified_header
from members.models import Member
from members.services import agent_create, member_disable, member_upsert, team_get_or_create
from plans.keys import signing_key_revoke, signing_key_rotate, signing_keys_bootstrap
from plans.models import Plan, SigningKey
from plans.selectors import SigningContext, plan_for_signing, signing_context_read
from plans.services import plan_get_for_agent
from policies.selectors import policy_active_version
from policies.services import policy_set
from tests.conftest import POLICY, plan_document

# The fixture's policy with one more rule, which admits the same plans: a new version.
NEWER_POLICY = {**POLICY, "rules": [*POLICY["rules"], {"effect": "deny", "tools": ["never_*"]}]}


def orm_answer(agent, *, email: str | None = None, member_id: int | None = None) -> tuple:
    """The same facts read through the ORM, one query each, as the services read them
    before signing_context_read."""
    members = Member.objects.select_related("role")
    if email is not None:
        member = members.for_email(agent.team_id, email).first()
    else:
        member = members.filter(pk=member_id, team_id=agent.team_id).first()
    version = policy_active_version(policy=agent.policy_id)
    key = SigningKey.objects.filter(state=SigningKey.State.ACTIVE).first()
    return (
        None if member is None else (member.pk, member.email, member.is_active),
        member.role.name if member is not None and member.role else None,
        sorted(member.groups.values_list("name", flat=True)) if member is not None else [],
        None
        if version is None
        else (version.pk, version.number, version.hash, version.document, version.policy.slug),
        None if key is None else (key.kid, key.state, key.private_key_encrypted),
    )


def selector_answer(context: SigningContext) -> tuple:
    member, version, key = context.member, context.version, context.active_key
    return (
        None if member is None else (member.pk, member.email, member.is_active),
        context.role,
        context.groups,
        None
        if version is None
        else (version.pk, version.number, version.hash, version.document, version.policy.slug),
        None if key is None else (key.kid, key.state, key.private_key_encrypted),
    )


@pytest.mark.parametrize(
    "email",
    ["alice@acme.dev", "ALICE@Acme.Dev", " alice@acme.dev ", "sam@acme.dev", "dora@acme.dev"],
)
def test_the_one_read_answers_as_the_orm_for_each_member(agent, sre_member, disabled_member, email):
    signing_keys_bootstrap()
    agent_row = agent.agent

    context = signing_context_read(agent=agent_row, member_email=email)

    assert context.member is not None
    assert selector_answer(context) == orm_answer(agent_row, email=email)


def test_an_unknown_member_a_member_of_another_team_and_no_key_are_none(agent, outsider):
    agent_row = agent.agent
    assert not SigningKey.objects.exists()

    for email in ["nobody@acme.dev", outsider.email]:
        context = signing_context_read(agent=agent_row, member_email=email)
        assert selector_answer(context) == orm_answer(agent_row, email=email)
        assert context.member is None and context.groups == [] and context.role is None
        assert context.active_key is None
    # By id, another team's member is not found either.
    assert signing_context_read(agent=agent_row, member_id=outsider.pk).member is None


def test_by_id_a_member_without_role_or_groups_and_the_newest_version(agent, team):
    bare = member_upsert(team=team, email="bare@acme.dev")
    newer = policy_set(team=team, slug="default", document=NEWER_POLICY)
    signing_keys_bootstrap()
    signing_key_rotate(force=True)
    agent_row = agent.agent

    context = signing_context_read(agent=agent_row, member_id=bare.pk)

    assert selector_answer(context) == orm_answer(agent_row, member_id=bare.pk)
    assert (context.role, context.groups) == (None, [])
    assert context.version is not None and context.version.pk == newer.pk
    assert newer.number == 2


def test_the_loaded_rows_defer_nothing_the_services_read(agent, django_assert_num_queries):
    signing_keys_bootstrap()
    with django_assert_num_queries(1):
        context = signing_context_read(agent=agent.agent, member_email="alice@acme.dev")
        assert context.member is not None and context.version is not None
        assert context.active_key is not None
        # What issuance reads of them: no further query.
        _ = (context.member.email, context.member.is_active, context.member.team_id)
        _ = (context.version.document, context.version.policy.slug, context.version.number)
        _ = (context.active_key.kid, context.active_key.private_key_encrypted)


def _declare(agent):
    return agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")


def test_a_member_disabled_between_two_requests_is_refused_at_the_next(agent, team):
    assert _declare(agent).status_code == 201

    member_disable(team=team, email="alice@acme.dev")
    response = _declare(agent)

    assert response.status_code == 403
    assert response.json()["code"] == "user_disabled"


def test_a_new_policy_version_signs_the_next_request(agent, team):
    first = _declare(agent).json()
    newer = policy_set(team=team, slug="default", document=NEWER_POLICY)

    second = _declare(agent).json()

    assert first["policy"]["version"] == newer.number - 1
    assert second["policy"]["version"] == newer.number


def test_a_revoked_signing_key_never_signs_the_next_request_nor_refreshes(agent):
    first = _declare(agent).json()
    revoked = unverified_header(first["token"])["kid"]

    signing_key_revoke(kid=revoked)
    second = _declare(agent)
    refresh = agent.client.post(
        f"/v1/plans/{first['id']}/refresh", {"token": first["token"]}, format="json"
    )

    assert second.status_code == 201
    assert unverified_header(second.json()["token"])["kid"] != revoked
    assert refresh.json()["code"] == "invalid_token"


def test_the_plan_read_for_signing_answers_as_the_orm(
    agent, other_agent, team, django_assert_num_queries
):
    team.log_call_arguments = True
    team.save(update_fields=["log_call_arguments"])
    issued = _declare(agent).json()
    orm = plan_get_for_agent(agent=agent.agent, plan_id=issued["id"])

    with django_assert_num_queries(1):
        plan = plan_for_signing(agent=agent.agent, plan_id=issued["id"])
        assert plan is not None
        read = (plan.member.email, plan.member.is_active, plan.team.log_call_arguments)

    fields = [field.attname for field in Plan._meta.concrete_fields]
    assert [getattr(plan, name) for name in fields] == [getattr(orm, name) for name in fields]
    assert read == (orm.member.email, orm.member.is_active, True)
    assert plan.member.pk == orm.member.pk
    # Another agent's plan, of this team or another, is not found.
    assert plan_for_signing(agent=other_agent.agent, plan_id=issued["id"]) is None


def test_the_key_a_token_names_is_read_unless_it_was_revoked(agent):
    signing_keys_bootstrap()
    old = SigningKey.objects.get(state=SigningKey.State.ACTIVE).kid
    member_id = Member.objects.get(email="alice@acme.dev").pk

    named = signing_context_read(agent=agent.agent, member_id=member_id, verifying_kid=old)
    signing_key_revoke(kid=old)
    revoked = signing_context_read(agent=agent.agent, member_id=member_id, verifying_kid=old)
    unknown = signing_context_read(agent=agent.agent, member_id=member_id, verifying_kid="x" * 43)

    assert named.verifying_key is not None
    assert (named.verifying_key.kid, named.verifying_key.state) == (old, "active")
    assert named.verifying_key.public_key == SigningKey.objects.get(kid=old).public_key
    assert revoked.verifying_key is None and unknown.verifying_key is None
    # The revocation made another key the active one, read in the same statement.
    assert revoked.active_key is not None and revoked.active_key.kid != old


members_strategy = st.lists(
    st.tuples(
        st.sampled_from(["alice", "bob", "Carol", "dave.o", "eve+x"]),
        st.sampled_from([None, "sre", "engineer"]),
        st.sets(st.sampled_from(["oncall", "db", "Web"]), max_size=3),
        st.booleans(),
    ),
    max_size=4,
    unique_by=lambda member: member[0].lower(),
)


class GeneratedTeamsTests(TestCase):
    """The one read and the ORM agree over generated teams: members of any e-mail case,
    role, groups and state, a policy with one or more versions, keys or none."""

    @settings(max_examples=20)
    @given(
        members=members_strategy,
        versions=st.integers(1, 3),
        keys=st.booleans(),
        cases=st.lists(st.sampled_from([str.lower, str.upper, str.title]), min_size=4),
    )
    def test_the_one_read_answers_as_the_orm(self, members, versions, keys, cases) -> None:
        team = team_get_or_create(slug="generated")
        other = team_get_or_create(slug="elsewhere")
        member_upsert(team=other, email="alice@acme.dev")
        for local, role, groups, active in members:
            member_upsert(
                team=team,
                email=f"{local}@acme.dev",
                role=role,
                groups=sorted(groups),
                is_active=active,
            )
        for number in range(versions):
            rules = [
                *POLICY["rules"],
                *({"effect": "deny", "tools": [f"v{n}_*"]} for n in range(number)),
            ]
            version = policy_set(team=team, slug="default", document={**POLICY, "rules": rules})
        agent_row = agent_create(team=team, name="generated", policy=version.policy)
        if keys:
            signing_keys_bootstrap()

        emails = [f"{local}@acme.dev" for local, *_ in members]
        asked = [case(email) for email, case in zip(emails, cases, strict=False)]
        for email in [*asked, "nobody@acme.dev", " ALICE@acme.dev "]:
            context = signing_context_read(agent=agent_row, member_email=email)
            assert selector_answer(context) == orm_answer(agent_row, email=email)
        for member in Member.objects.filter(team__in=[team, other]):
            context = signing_context_read(agent=agent_row, member_id=member.pk)
            assert selector_answer(context) == orm_answer(agent_row, member_id=member.pk)
