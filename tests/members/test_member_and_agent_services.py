"""member_save, agent_create, agent_update: the team rules, refused with field paths and
nothing written; the admin and the commands both come through here."""

from __future__ import annotations

import pytest

from kernel.problems import Code, DomainError
from members.models import Agent, Member
from members.services import agent_create, agent_update, member_save, member_upsert
from policies.services import policy_set
from tests.conftest import POLICY


def _paths(exc: pytest.ExceptionInfo[DomainError]) -> list[str]:
    assert exc.value.code == Code.INVALID_REQUEST
    return [error.path for error in exc.value.errors]


def test_member_save_creates_with_objects_or_names(team):
    sre = member_upsert(team=team, email="x@acme.dev", role="sre", groups=["oncall"]).role
    oncall = team.groups.get(name="oncall")

    member = member_save(team=team, email=" Bob@Acme.dev", role=sre, groups=[oncall, "new"])

    member.refresh_from_db()
    assert member.email == "bob@acme.dev"
    assert member.role == sre
    assert member.group_names() == ["new", "oncall"]


def test_another_team_s_role_and_groups_are_refused_naming_the_fields(team, other_team, outsider):
    foreign = member_upsert(team=other_team, email="y@globex.test", role="r", groups=["g"])
    members = Member.objects.count()

    with pytest.raises(DomainError) as refused:
        member_save(
            team=team, email="bob@acme.dev", role=foreign.role, groups=list(foreign.groups.all())
        )

    assert _paths(refused) == ["role", "groups"]
    assert "Not in team default" in refused.value.errors[0].detail
    assert Member.objects.count() == members


def test_a_taken_email_is_refused_on_create_and_on_update(team, member, sre_member):
    with pytest.raises(DomainError) as created:
        member_save(team=team, email=member.email.upper())
    assert _paths(created) == ["email"]

    with pytest.raises(DomainError) as updated:
        member_save(team=team, email=member.email, member=sre_member)
    assert _paths(updated) == ["email"]
    sre_member.refresh_from_db()
    assert sre_member.email != member.email


def test_an_invalid_email_is_a_domain_error_naming_the_field(team):
    with pytest.raises(DomainError) as refused:
        member_save(team=team, email="not an e-mail")
    assert _paths(refused) == ["email"]
    assert not Member.objects.filter(team=team, email="not an e-mail").exists()


def test_an_agent_needs_its_team_s_policy_and_a_free_name(agent, team, other_team):
    foreign = policy_set(team=other_team, slug="p", document=POLICY).policy
    agents = Agent.objects.count()

    with pytest.raises(DomainError) as wrong_policy:
        agent_create(team=team, name="new", policy=foreign)
    assert _paths(wrong_policy) == ["policy"]
    with pytest.raises(DomainError) as taken:
        agent_create(team=team, name=agent.agent.name, policy=agent.agent.policy)
    assert _paths(taken) == ["name"]
    assert Agent.objects.count() == agents


def test_agent_update_changes_the_given_fields_and_keeps_the_rules(agent, other_team):
    renamed = agent_update(agent=agent.agent, name="renamed", is_active=False)
    assert (renamed.name, renamed.is_active) == ("renamed", False)

    foreign = policy_set(team=other_team, slug="p", document=POLICY).policy
    with pytest.raises(DomainError) as refused:
        agent_update(agent=Agent.objects.get(pk=agent.agent.pk), policy=foreign)
    assert _paths(refused) == ["policy"]
    assert Agent.objects.get(pk=agent.agent.pk).policy_id == agent.agent.policy_id
