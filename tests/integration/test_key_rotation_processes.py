"""Key rotation in real processes: concurrent rotations on PostgreSQL, and Celery beat
rotating on schedule through a real worker and Redis."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from plans.keys import signing_keys_bootstrap
from plans.models import SigningKey
from tests.plans.keys_helpers import age_keys, kid_in, states

from .processes import (
    IS_POSTGRES,
    IS_REDIS,
    NEEDS_POSTGRES,
    NEEDS_REDIS,
    ROOT,
    forget_queue,
    process_env,
    start_beat_worker,
    stop,
    tail,
    unique_queue,
    wait_for,
)

DAY = 86400


@pytest.mark.parametrize("mode", ["force", "scheduled"])
@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
@pytest.mark.django_db(transaction=True)
def test_three_concurrent_rotations_rotate_exactly_once(tmp_path, mode):
    signing_keys_bootstrap()
    age_keys(DAY)
    old_active, old_next = kid_in("active"), kid_in("next")
    barrier = tmp_path / "go"
    env = process_env()
    processes, logs, ready = [], [], []
    try:
        for number in range(3):
            ready.append(tmp_path / f"ready-{number}")
            logs.append(tmp_path / f"rotation-{number}.log")
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tests.integration.rotate_when_released",
                        str(ready[-1]),
                        str(barrier),
                        mode,
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        assert wait_for(
            lambda: all(path.exists() for path in ready) or any(p.poll() for p in processes),
            timeout=120,
        ), "the rotation processes did not start"
        barrier.touch()
        outputs = [process.communicate(timeout=120) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()

    for process, (_, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr
    results = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in outputs]
    rotated = [result for result in results if result["activated"]]
    assert len(rotated) == 1, results
    assert (rotated[0]["retired"], rotated[0]["activated"]) == (old_active, old_next)
    skipped = {"force": "next_key_too_young", "scheduled": "recently_rotated"}[mode]
    assert sorted(result["outcome"] for result in results) == sorted(["rotated", skipped, skipped])
    # Exactly one rotation's worth of change: one retired, one active, one new next key.
    assert states() == {old_active: "retired", old_next: "active", rotated[0]["created"]: "next"}


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.worker
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
@pytest.mark.skipif(not IS_REDIS, reason=NEEDS_REDIS)
@pytest.mark.django_db(transaction=True)
def test_celery_beat_rotates_the_keys_on_schedule_through_a_real_worker(tmp_path):
    signing_keys_bootstrap()
    age_keys(DAY)
    first_active = kid_in("active")
    queue = unique_queue()
    env = process_env(
        KEY_ROTATION_SECONDS="3",
        PLANGATE_JWKS_MAX_AGE="1",
        PLAN_EXPIRY_SWEEP_SECONDS="3600",
        CELERY_TASK_DEFAULT_QUEUE=queue,
    )
    worker, log = start_beat_worker(queue, env=env, directory=tmp_path)
    active_kids: list[str] = [first_active]

    def rotated_twice() -> bool:
        if worker.poll() is not None:
            return True
        active = list(SigningKey.objects.filter(state="active").values_list("kid", flat=True))
        assert len(active) == 1, active
        if active[0] != active_kids[-1]:
            active_kids.append(active[0])
        return len(active_kids) >= 3

    try:
        finished = wait_for(rotated_twice, timeout=180, interval=0.5)
        assert worker.poll() is None, f"the worker exited:\n{tail(log)}"
        assert finished, f"no two rotations within the time limit:\n{tail(log)}"
    finally:
        stop(worker)
        forget_queue(queue)

    # Each rotation retired the key the previous one activated.
    retired = set(SigningKey.objects.filter(state="retired").values_list("kid", flat=True))
    assert set(active_kids[:2]) <= retired
    assert sorted(states().values()).count("active") == 1
    assert sorted(states().values()).count("next") == 1
    assert "plans.tasks.rotate_signing_keys" in log.read_text(errors="replace")


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.worker
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
@pytest.mark.skipif(not IS_REDIS, reason=NEEDS_REDIS)
@pytest.mark.django_db(transaction=True)
def test_beat_checks_often_and_rotates_an_overdue_key_once_with_the_default_period(tmp_path):
    # The default period (a day), checked every second: a key activated more than a day ago
    # (a tick lost to a broker outage, say) rotates at the next check, not a day later.
    signing_keys_bootstrap()
    age_keys(DAY + 60)
    old_active, old_next = kid_in("active"), kid_in("next")
    queue = unique_queue()
    env = process_env(
        KEY_ROTATION_SECONDS=str(DAY),
        KEY_ROTATION_CHECK_SECONDS="1",
        PLAN_EXPIRY_SWEEP_SECONDS="3600",
        CELERY_TASK_DEFAULT_QUEUE=queue,
    )
    worker, log = start_beat_worker(queue, env=env, directory=tmp_path)

    def checks_after_the_rotation() -> int:
        text = log.read_text(errors="replace")
        rotated_at = text.find("signing keys: rotated:")
        return -1 if rotated_at < 0 else text.count("recently_rotated", rotated_at)

    try:
        # Three checks after the rotation found nothing to do.
        finished = wait_for(
            lambda: worker.poll() is not None or checks_after_the_rotation() >= 3,
            timeout=120,
            interval=0.5,
        )
        assert worker.poll() is None, f"the worker exited:\n{tail(log)}"
        assert finished, f"no rotation and later checks within the time limit:\n{tail(log)}"
    finally:
        stop(worker)
        forget_queue(queue)

    after = states()
    assert after[old_active] == "retired" and after[old_next] == "active"
    # Exactly one rotation: the later checks changed nothing.
    assert sorted(after.values()) == ["active", "next", "retired"]
    assert log.read_text(errors="replace").count("signing keys: rotated:") == 1
