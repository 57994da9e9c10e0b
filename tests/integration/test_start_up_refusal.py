"""Outside `make run`, a start without a usable KEY_ENCRYPTION_KEY fails loudly: gunicorn,
the Celery worker and `manage.py check` refuse, naming the problem. No outside service is
needed: each process gets its own SQLite file and an in-memory broker."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.plans.keys_helpers import OTHER_ENCRYPTION_KEY, TEST_ENCRYPTION_KEY

from .processes import BIN, ROOT

TIMEOUT = 120


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> str:
    """A migrated SQLite file holding signing keys stored under TEST_ENCRYPTION_KEY."""
    url = f"sqlite:///{tmp_path_factory.mktemp('start-up') / 'plangate.sqlite3'}"
    for command in (["migrate", "--noinput", "-v", "0"], ["rotate_keys"]):
        completed = run([sys.executable, "manage.py", *command], url=url, key=TEST_ENCRYPTION_KEY)
        assert completed.returncode == 0, completed.stdout
    return url


def run(args: list[str], *, url: str, key: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "PLANGATE_ENV_FILE": os.devnull,
        "SECRET_KEY": "start-up-test-secret-key-0123456789abcdef",
        "KEY_ENCRYPTION_KEY": key,
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": "memory://",
    }
    return subprocess.run(
        args,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def gunicorn(url: str, key: str) -> subprocess.CompletedProcess:
    return run(
        [
            str(BIN / "gunicorn"),
            "controlplane.wsgi",
            "--bind",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--timeout",
            "60",
        ],
        url=url,
        key=key,
    )


def celery_worker(url: str, key: str) -> subprocess.CompletedProcess:
    return run(
        [str(BIN / "celery"), "-A", "controlplane", "worker", "--pool", "solo"], url=url, key=key
    )


def kids(url: str) -> list[str]:
    completed = run(
        [sys.executable, "manage.py", "list_keys", "--json"], url=url, key=TEST_ENCRYPTION_KEY
    )
    return [entry["kid"] for entry in json.loads(completed.stdout)]


@pytest.mark.parametrize("key", ["", "not-a-fernet-key"])
def test_gunicorn_refuses_to_start_without_an_encryption_key(database, key):
    completed = gunicorn(database, key)

    assert completed.returncode != 0
    assert "ImproperlyConfigured" in completed.stdout
    assert "KEY_ENCRYPTION_KEY" in completed.stdout


def test_gunicorn_refuses_to_start_with_a_key_that_cannot_decrypt_the_signing_keys(database):
    completed = gunicorn(database, OTHER_ENCRYPTION_KEY)

    assert completed.returncode != 0
    assert "cannot be decrypted with KEY_ENCRYPTION_KEY" in completed.stdout
    assert any(kid in completed.stdout for kid in kids(database))


@pytest.mark.worker
@pytest.mark.parametrize("key", ["", OTHER_ENCRYPTION_KEY])
def test_the_celery_worker_refuses_to_start_without_a_usable_encryption_key(database, key):
    completed = celery_worker(database, key)

    assert completed.returncode != 0
    assert "Refusing to start the Celery worker" in completed.stdout
    assert "KEY_ENCRYPTION_KEY" in completed.stdout


def test_manage_py_check_reports_a_key_that_cannot_decrypt_the_signing_keys(database):
    completed = run([sys.executable, "manage.py", "check"], url=database, key=OTHER_ENCRYPTION_KEY)

    assert completed.returncode != 0
    assert "plangate.E001" in completed.stdout
    assert "cannot be decrypted" in completed.stdout
    assert (
        run(
            [sys.executable, "manage.py", "check"], url=database, key=TEST_ENCRYPTION_KEY
        ).returncode
        == 0
    )


def test_list_keys_works_with_a_broken_encryption_key_to_diagnose_it(database):
    assert len(kids(database)) == 2
    completed = run([sys.executable, "manage.py", "list_keys"], url=database, key="")

    assert completed.returncode == 0, completed.stdout
    assert "active" in completed.stdout and "next" in completed.stdout
