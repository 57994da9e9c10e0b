"""Celery tasks and the beat schedule that drives them (run eagerly here; a real worker and
beat run in tests/integration/test_key_rotation_processes.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from audit.tasks import seal_audit_records
from controlplane.celery import app
from plans.keys import RotationResult, signing_keys_bootstrap
from plans.models import Plan
from plans.tasks import expire_plans, rotate_signing_keys
from tests.conftest import plan_document

from .keys_helpers import OTHER_ENCRYPTION_KEY, age_keys, kid_in, snapshot

DAY = 86400


def test_beat_checks_for_a_due_rotation_every_check_interval_and_sweeps_expired_plans():
    schedule = app.conf.beat_schedule

    tasks = {entry["task"]: entry["schedule"] for entry in schedule.values()}
    assert tasks == {
        "plans.tasks.rotate_signing_keys": settings.KEY_ROTATION_CHECK_SECONDS,
        "plans.tasks.expire_plans": settings.PLAN_EXPIRY_SWEEP_SECONDS,
        "plans.tasks.expire_approvals": settings.APPROVAL_EXPIRY_SWEEP_SECONDS,
        seal_audit_records.name: settings.AUDIT_SEAL_SECONDS,
        "plans.retention.apply_retention": settings.RETENTION_SECONDS,
        "notify.tasks.scan_alerts": settings.ALERT_SCAN_SECONDS,
    }
    assert set(tasks) <= set(app.tasks)
    # Checks, not one tick a period: a tick the broker lost costs minutes, not a day.
    assert settings.KEY_ROTATION_CHECK_SECONDS == 300 < settings.KEY_ROTATION_SECONDS / 10
    # A check that waited in the queue past the next one is superseded by it.
    rotation = next(e for e in schedule.values() if e["task"].endswith("rotate_signing_keys"))
    assert rotation["options"]["expires"] == settings.KEY_ROTATION_CHECK_SECONDS


@pytest.mark.django_db
def test_a_check_rotates_within_one_check_interval_once_a_period_has_passed():
    signing_keys_bootstrap()
    check = settings.KEY_ROTATION_CHECK_SECONDS
    # The active key has signed for a period less half a check interval (its next key is
    # as old, so long published): the check at this moment is early.
    age_keys(settings.KEY_ROTATION_SECONDS - check / 2)
    old_active, old_next = kid_in("active"), kid_in("next")
    before = snapshot()

    early = rotate_signing_keys.apply().get()
    assert early["outcome"] == RotationResult.RECENTLY_ROTATED
    assert snapshot() == before

    age_keys(check)  # the next check, one interval later: the period has passed
    due = rotate_signing_keys.apply().get()
    assert due["outcome"] == RotationResult.ROTATED
    assert (due["retired"], due["activated"]) == (old_active, old_next)


@pytest.mark.django_db
def test_a_check_half_a_period_after_the_last_rotation_does_nothing():
    signing_keys_bootstrap()
    age_keys(settings.KEY_ROTATION_SECONDS * 0.6)
    before = snapshot()

    result = rotate_signing_keys.apply().get()

    assert result["outcome"] == RotationResult.RECENTLY_ROTATED
    assert snapshot() == before


def test_the_tasks_have_time_limits():
    for task in (rotate_signing_keys, expire_plans):
        assert 0 < task.soft_time_limit < task.time_limit


@pytest.mark.django_db
def test_the_rotation_task_rotates_once_and_a_duplicate_tick_does_nothing():
    signing_keys_bootstrap()
    age_keys(DAY)
    old_active, old_next = kid_in("active"), kid_in("next")

    first = rotate_signing_keys.apply().get()
    before = snapshot()
    duplicate = rotate_signing_keys.apply().get()

    assert first["outcome"] == RotationResult.ROTATED
    assert (first["retired"], first["activated"]) == (old_active, old_next)
    assert duplicate["outcome"] == RotationResult.RECENTLY_ROTATED
    assert snapshot() == before


@pytest.mark.django_db
def test_a_refused_rotation_is_logged_with_the_kid(caplog):
    signing_keys_bootstrap()
    age_keys(DAY)
    before = snapshot()

    with override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY):
        result = rotate_signing_keys.apply()

    assert result.failed()
    assert f"signing-key rotation refused: signing key {kid_in('next')}" in caplog.text
    assert snapshot() == before


def test_the_expiry_task_marks_plans_past_their_lifetime(agent):
    response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    plan_id = response.json()["id"]
    Plan.objects.filter(pk=plan_id).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert expire_plans.apply().get() == 1
    assert Plan.objects.get(pk=plan_id).status == Plan.Status.EXPIRED
    assert expire_plans.apply().get() == 0
