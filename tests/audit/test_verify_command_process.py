"""``manage.py verify_audit`` as an operator runs it: its exit status says whether the trail
was tampered with (PostgreSQL, so the command's own process sees the test database)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from audit.models import AuditRecord
from audit.services import records_seal
from tests.integration.processes import ROOT, SHARED_DATABASE_MARKS, process_env

from .helpers import append, record_id_at, sql

pytestmark = [pytest.mark.slow, *SHARED_DATABASE_MARKS]


def verify_audit(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "verify_audit", "--skip-checks", *arguments],
        cwd=ROOT,
        env=process_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_exit_status_is_0_when_intact_and_1_naming_the_record_when_not(team):
    append(team, 5)
    records_seal()
    append(team, 1)
    intact = verify_audit("--team", team.slug)
    assert intact.returncode == 0, intact.stderr
    assert "chain intact" in intact.stdout and "1 not sealed yet" in intact.stdout

    victim = record_id_at(team, 3)
    table = AuditRecord._meta.db_table
    sql(f'UPDATE {table} SET "user" = %s WHERE id = %s', ["mallory@acme.dev", victim])  # noqa: S608
    broken = verify_audit()
    assert broken.returncode == 1
    assert f"team {team.slug}: chain broken at seq 3, id {victim}: changed" in broken.stderr
