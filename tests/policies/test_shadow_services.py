"""Shadow versions: published beside the active version, withdrawn, promoted through the
usual publication; numbered with the others; each leaving one activity record; the
active version unchanged until a promotion."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditRecord
from kernel.problems import Code, DomainError
from policies.models import Policy, PolicyVersion
from policies.selectors import policy_active_version, policy_shadow_version
from policies.services import (
    SHADOW_PROMOTED,
    SHADOW_PUBLISHED,
    SHADOW_WITHDRAWN,
    policy_set,
    policy_shadow_promote,
    policy_shadow_publish,
    policy_shadow_withdraw,
    policy_version_publish,
)
from tests.conftest import POLICY

NO_MAIL = {**POLICY, "rules": [rule for rule in POLICY["rules"] if rule["tools"] != ["send_email"]]}
ALLOW_ALL = {**POLICY, "default": "allow"}


def policy_records(policy: Policy) -> list[dict]:
    return [
        record.details
        for record in AuditRecord.objects.filter(
            kind=AuditRecord.Kind.CHANGE, details__object="policy", details__id=policy.pk
        ).order_by("id")  # unsealed: seq is NULL; id is the order they were written
    ]


@pytest.fixture
def policy(policy_version) -> Policy:
    return policy_version.policy


def refreshed(policy: Policy) -> Policy:
    return Policy.objects.get(pk=policy.pk)


def test_publishing_in_shadow_numbers_the_version_and_leaves_the_active_one(policy):
    active = policy_active_version(policy=policy)
    before = len(policy_records(policy))

    shadow = policy_shadow_publish(
        policy=policy, document=NO_MAIL, comment="try without mail", created_by="tessa"
    )

    assert (shadow.number, shadow.shadow, shadow.comment) == (2, True, "try without mail")
    assert refreshed(policy).shadow_version_id == shadow.pk
    assert policy_active_version(policy=policy) == active
    records = policy_records(policy)
    assert len(records) == before + 1
    assert records[-1]["action"] == SHADOW_PUBLISHED
    assert records[-1]["changes"] == {"shadow_version": [None, 2]}
    assert records[-1]["author"] == "tessa"
    assert records[-1]["hash"] == shadow.hash
    record = AuditRecord.objects.filter(details__action=SHADOW_PUBLISHED).get()
    assert (record.policy, record.policy_version) == ("default", 2)


def test_a_new_shadow_replaces_the_previous_and_the_next_active_version_follows_both(policy):
    first = policy_shadow_publish(policy=policy, document=NO_MAIL)
    second = policy_shadow_publish(policy=policy, document=ALLOW_ALL)

    assert (first.number, second.number) == (2, 3)
    assert policy_shadow_version(policy=refreshed(policy)) == second
    assert policy_records(policy)[-1]["changes"] == {"shadow_version": [2, 3]}
    # An edit published meanwhile takes the number after the shadows, and is active.
    edited = policy_version_publish(
        policy=policy, document={**POLICY, "rules": POLICY["rules"][:2]}
    )
    assert edited.number == 4 and not edited.shadow
    assert policy_active_version(policy=policy) == edited
    assert refreshed(policy).shadow_version_id == second.pk


def test_the_same_document_as_the_shadow_publishes_nothing(policy):
    shadow = policy_shadow_publish(policy=policy, document=NO_MAIL)
    records = len(policy_records(policy))

    again = policy_shadow_publish(policy=policy, document=NO_MAIL)

    assert again == shadow
    assert PolicyVersion.objects.filter(policy=policy).count() == 2
    assert len(policy_records(policy)) == records


def test_an_invalid_shadow_document_is_refused_and_writes_nothing(policy):
    records = len(policy_records(policy))
    bad = {**POLICY, "rules": [{"effect": "allow", "tools": ["x"], "args": {"a": {"regx": "b"}}}]}

    with pytest.raises(DomainError) as raised:
        policy_shadow_publish(policy=policy, document=bad)

    assert raised.value.code == Code.INVALID_POLICY
    assert PolicyVersion.objects.filter(policy=policy).count() == 1
    assert refreshed(policy).shadow_version_id is None
    assert len(policy_records(policy)) == records


def test_a_policy_with_nothing_published_has_no_shadow(team):
    with pytest.raises(DomainError) as raised:
        policy_set(team=team, slug="fresh", document=POLICY, shadow=True)

    assert raised.value.code == Code.INVALID_REQUEST
    assert [error.path for error in raised.value.errors] == ["shadow"]
    assert not Policy.objects.filter(slug="fresh").exists()
    assert not AuditRecord.objects.filter(details__object="policy").exists()


def test_withdrawing_clears_the_shadow_and_keeps_its_version(policy):
    active = policy_active_version(policy=policy)
    shadow = policy_shadow_publish(policy=policy, document=NO_MAIL)

    withdrawn = policy_shadow_withdraw(policy=policy, by="tessa")

    assert withdrawn == shadow
    assert refreshed(policy).shadow_version_id is None
    assert PolicyVersion.objects.filter(pk=shadow.pk, shadow=True).exists()
    assert policy_active_version(policy=policy) == active
    record = policy_records(policy)[-1]
    assert record["action"] == SHADOW_WITHDRAWN
    assert record["changes"] == {"shadow_version": [2, None]}
    assert record["by"] == "tessa"


def test_withdrawing_without_a_shadow_is_refused_and_writes_nothing(policy):
    records = len(policy_records(policy))

    with pytest.raises(DomainError) as raised:
        policy_shadow_withdraw(policy=policy, by="tessa")

    assert raised.value.code == Code.INVALID_REQUEST
    assert [error.path for error in raised.value.errors] == ["shadow_version"]
    assert len(policy_records(policy)) == records


def test_promoting_publishes_the_shadow_document_as_the_next_active_version(policy):
    shadow = policy_shadow_publish(policy=policy, document=NO_MAIL)

    promoted = policy_shadow_promote(policy=policy, created_by="tessa", expected_base=1)

    assert (promoted.number, promoted.shadow) == (3, False)
    assert promoted.document == shadow.document and promoted.hash == shadow.hash
    assert promoted.comment == "promoted from shadow v2"
    assert promoted.created_by == "tessa"
    assert policy_active_version(policy=policy) == promoted
    assert refreshed(policy).shadow_version_id is None
    actions = [(record["action"], record["changes"]) for record in policy_records(policy)[-2:]]
    assert actions == [
        ("published", {"version": [2, 3]}),
        (SHADOW_PROMOTED, {"shadow_version": [2, None]}),
    ]


def test_promoting_over_a_version_published_meanwhile_is_refused(policy):
    policy_shadow_publish(policy=policy, document=NO_MAIL)
    policy_version_publish(policy=policy, document=ALLOW_ALL, created_by="otto")
    records = len(policy_records(policy))

    with pytest.raises(DomainError) as raised:
        policy_shadow_promote(policy=policy, created_by="tessa", expected_base=1)

    assert [error.path for error in raised.value.errors] == ["expected_base"]
    assert "Version 3 was published by otto" in raised.value.errors[0].detail
    assert policy_active_version(policy=policy).number == 3
    assert refreshed(policy).shadow_version is not None
    assert len(policy_records(policy)) == records


def test_promoting_a_shadow_replaced_since_it_was_reviewed_is_refused(policy):
    policy_shadow_publish(policy=policy, document=NO_MAIL)
    policy_shadow_publish(policy=policy, document=ALLOW_ALL)

    with pytest.raises(DomainError) as raised:
        policy_shadow_promote(policy=policy, created_by="tessa", expected_shadow=2)

    assert [error.path for error in raised.value.errors] == ["expected_shadow"]
    assert policy_active_version(policy=policy).number == 1
    assert refreshed(policy).shadow_version.number == 3


def test_promoting_without_a_shadow_is_refused(policy):
    with pytest.raises(DomainError) as raised:
        policy_shadow_promote(policy=policy, created_by="tessa")

    assert raised.value.code == Code.INVALID_REQUEST
    assert PolicyVersion.objects.filter(policy=policy).count() == 1


def write(tmp_path, document) -> str:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(document))
    return str(path)


def test_set_policy_shadow_publishes_in_shadow_and_says_so(policy, tmp_path):
    out = StringIO()

    call_command(
        "set_policy", "default", "--file", write(tmp_path, NO_MAIL), "--shadow", stdout=out
    )

    answer = json.loads(out.getvalue())
    shadow = policy_shadow_version(policy=refreshed(policy))
    assert shadow is not None
    assert answer == {"policy": "default", "version": 2, "hash": shadow.hash, "shadow": True}
    assert shadow.created_by == "set_policy"
    assert policy_active_version(policy=policy).number == 1
    assert policy_records(policy)[-1]["action"] == SHADOW_PUBLISHED


def test_set_policy_shadow_with_a_refused_document_publishes_nothing(policy, tmp_path):
    bad = {**POLICY, "default": "maybe"}

    with pytest.raises(CommandError):
        call_command(
            "set_policy", "default", "--file", write(tmp_path, bad), "--shadow", stdout=StringIO()
        )
    with pytest.raises(CommandError, match="publish a first version"):
        call_command(
            "set_policy",
            "new-one",
            "--file",
            write(tmp_path, POLICY),
            "--shadow",
            stdout=StringIO(),
        )

    assert PolicyVersion.objects.count() == 1
    assert refreshed(policy).shadow_version_id is None
    assert not Policy.objects.filter(slug="new-one").exists()
