"""A policy's active version is its newest: one rule, read by the selector, the annotated
QuerySet and the agents' annotation alike."""

from __future__ import annotations

from members.models import Agent
from policies.models import Policy, active_version_annotations
from policies.selectors import policy_active_version
from policies.services import policy_set
from tests.conftest import POLICY


def test_a_policy_with_no_version_has_no_active_version(team):
    policy = Policy.objects.create(team=team, slug="empty")
    assert policy_active_version(policy=policy) is None
    annotated = Policy.objects.with_active_version().get(pk=policy.pk)
    assert annotated.active_version_id is None
    assert annotated.active_version_number is None


def test_the_newest_version_is_the_active_one_everywhere(team):
    first = policy_set(team=team, slug="p", document=POLICY)
    second = policy_set(team=team, slug="p", document={**POLICY, "default": "allow"})
    other = policy_set(team=team, slug="q", document=POLICY)

    assert policy_active_version(policy=first.policy) == second
    assert policy_active_version(policy=first.policy_id) == second
    annotated = {policy.slug: policy for policy in Policy.objects.with_active_version()}
    assert (annotated["p"].active_version_id, annotated["p"].active_version_number) == (
        second.pk,
        2,
    )
    assert (annotated["q"].active_version_id, annotated["q"].active_version_number) == (
        other.pk,
        1,
    )


def test_an_agent_reads_its_policy_s_active_version(agent, team):
    policy = agent.agent.policy
    newer = policy_set(team=team, slug=policy.slug, document={**POLICY, "default": "allow"})
    annotated = Agent.objects.annotate(**active_version_annotations("policy_id")).get(
        pk=agent.agent.pk
    )
    assert annotated.active_version_id == newer.pk
    assert annotated.active_version_number == newer.number
