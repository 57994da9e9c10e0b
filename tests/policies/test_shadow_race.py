"""A shadow published while an edit is being published waits for the policy's row lock and
takes the number after it (PostgreSQL, real commits, two connections); a promotion that
waited behind a publication is refused by its "published meanwhile" check."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connections, transaction

from kernel.problems import DomainError
from policies.models import Policy, PolicyVersion
from policies.selectors import policy_active_version
from policies.services import (
    policy_set,
    policy_shadow_promote,
    policy_shadow_publish,
    policy_version_publish,
)
from tests.conftest import POLICY
from tests.integration.processes import IS_POSTGRES, NEEDS_POSTGRES, wait_for
from tests.plans.test_refusal_after_rollback import another_backend_waits_for_a_lock

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES),
    pytest.mark.django_db(transaction=True),
]

ALLOW_ALL = {**POLICY, "default": "allow"}
NO_MAIL = {**POLICY, "rules": [rule for rule in POLICY["rules"] if rule["tools"] != ["send_email"]]}


def while_publishing(policy_id: int, waiting: Callable[[Policy], object]) -> list:
    """Publish ALLOW_ALL holding the policy's row lock while ``waiting`` runs on another
    connection (and waits for the lock); its answer or exception, once both are done."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(waiting(Policy.objects.get(pk=policy_id)))
        except BaseException as exc:  # reported by the test, not lost in the thread
            outcome.append(exc)
        finally:
            connections.close_all()

    with transaction.atomic():
        policy = Policy.objects.select_for_update().get(pk=policy_id)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        assert wait_for(another_backend_waits_for_a_lock, timeout=120)
        policy_version_publish(policy=policy, document=ALLOW_ALL, created_by="otto")
    thread.join(timeout=120)
    assert len(outcome) == 1
    return outcome


def test_a_shadow_published_during_an_edit_takes_the_next_number(team):
    policy = policy_set(team=team, slug="default", document=POLICY).policy

    (shadow,) = while_publishing(
        policy.pk, lambda each: policy_shadow_publish(policy=each, document=NO_MAIL)
    )

    assert isinstance(shadow, PolicyVersion), shadow
    numbers = list(
        PolicyVersion.objects.filter(policy=policy)
        .order_by("number")
        .values_list("number", "shadow")
    )
    assert numbers == [(1, False), (2, False), (3, True)]
    assert policy_active_version(policy=policy).number == 2
    assert Policy.objects.get(pk=policy.pk).shadow_version_id == shadow.pk


def test_a_promotion_that_waited_behind_a_publication_is_refused(team):
    policy = policy_set(team=team, slug="default", document=POLICY).policy
    shadow = policy_shadow_publish(policy=policy, document=NO_MAIL)

    (refused,) = while_publishing(
        policy.pk,
        lambda each: policy_shadow_promote(policy=each, created_by="tessa", expected_base=1),
    )

    assert isinstance(refused, DomainError), refused
    assert [error.path for error in refused.errors] == ["expected_base"]
    assert policy_active_version(policy=policy).number == 3
    assert Policy.objects.get(pk=policy.pk).shadow_version_id == shadow.pk
