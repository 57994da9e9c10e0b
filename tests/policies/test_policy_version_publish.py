"""policy_version_publish / policy_set: numbered, immutable versions."""

from __future__ import annotations

import hashlib

import pytest
import rfc8785

from kernel.problems import Code, DomainError
from policies.models import Policy, PolicyVersion
from policies.selectors import policy_active_version
from policies.services import policy_set, policy_version_publish
from tests.conftest import POLICY


def test_first_set_creates_version_one_with_the_rfc8785_hash(team):
    version = policy_set(team=team, slug="ops", document=POLICY, comment="first")

    assert version.number == 1
    assert version.comment == "first"
    assert version.hash == hashlib.sha256(rfc8785.dumps(version.document)).hexdigest()


def test_each_edit_publishes_the_next_number_and_leaves_old_versions_alone(team):
    first = policy_set(team=team, slug="ops", document=POLICY)
    original = dict(first.document)

    second = policy_version_publish(policy=first.policy, document={**POLICY, "default": "allow"})
    third = policy_version_publish(policy=first.policy, document=POLICY)

    assert [second.number, third.number] == [2, 3]
    first.refresh_from_db()
    assert first.document == original
    assert policy_active_version(policy=first.policy) == third


def test_saving_the_same_document_publishes_nothing(team):
    first = policy_set(team=team, slug="ops", document=POLICY)

    again = policy_version_publish(policy=first.policy, document=POLICY)

    assert again == first
    assert PolicyVersion.objects.count() == 1


def test_an_invalid_document_is_refused_with_paths_and_writes_nothing(team):
    first = policy_set(team=team, slug="ops", document=POLICY)
    bad = {
        **POLICY,
        "rules": [{"effect": "allow", "tools": ["github_*"], "args": {"repo": {"regx": "a"}}}],
    }

    with pytest.raises(DomainError) as raised:
        policy_version_publish(policy=first.policy, document=bad)

    assert raised.value.code == Code.INVALID_POLICY
    assert any(error.path.startswith("rules[0].args") for error in raised.value.errors)
    assert PolicyVersion.objects.count() == 1


def test_policy_set_refuses_before_creating_the_policy(team):
    with pytest.raises(DomainError):
        policy_set(team=team, slug="fresh", document={"version": 1})

    assert not Policy.objects.filter(slug="fresh").exists()


def test_the_same_slug_in_two_teams_is_two_policies(team, other_team):
    ours = policy_set(team=team, slug="ops", document=POLICY)
    theirs = policy_set(team=other_team, slug="ops", document={**POLICY, "default": "allow"})

    assert ours.policy != theirs.policy
    assert (ours.number, theirs.number) == (1, 1)


def test_a_version_published_since_the_editor_started_is_not_overwritten(team):
    first = policy_set(team=team, slug="ops", document=POLICY)
    policy_set(team=team, slug="ops", document={**POLICY, "default": "allow"}, created_by="cli")

    with pytest.raises(DomainError) as stale:
        policy_version_publish(policy=first.policy, document=POLICY, expected_base=1)

    assert stale.value.code == Code.PUBLISHED_MEANWHILE
    assert [error.path for error in stale.value.errors] == ["expected_base"]
    assert "Version 2 was published by cli" in stale.value.errors[0].detail
    assert first.policy.versions.count() == 2
    third = policy_version_publish(policy=first.policy, document=POLICY, expected_base=2)
    assert third.number == 3


def test_no_expected_base_publishes_over_whatever_is_current(team):
    first = policy_set(team=team, slug="ops", document=POLICY)
    policy_set(team=team, slug="ops", document={**POLICY, "default": "allow"})
    assert policy_version_publish(policy=first.policy, document=POLICY).number == 3


def test_a_refused_first_document_leaves_no_policy_behind(team):
    with pytest.raises(DomainError) as refused:
        policy_set(team=team, slug="new", document={**POLICY, "defualt": "allow"})
    assert refused.value.code == Code.INVALID_POLICY
    assert not Policy.objects.filter(slug="new").exists()
