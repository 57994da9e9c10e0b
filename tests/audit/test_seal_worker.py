"""A real Celery worker with beat seals records within seconds of their being written."""

from __future__ import annotations

import pytest

from audit.models import AuditRecord
from audit.verification import chain_verify
from tests.integration.processes import REAL_WORKER_MARKS, running_worker, wait_for

from .helpers import append, sealed_seqs

pytestmark = [pytest.mark.slow, *REAL_WORKER_MARKS]


def test_beat_and_a_real_worker_seal_new_records_on_schedule(tmp_path, team, other_team):
    append(team, 4)
    append(other_team, 2)
    with running_worker(tmp_path, beat=True, AUDIT_SEAL_SECONDS="1") as worker:

        def all_sealed() -> bool:
            return worker.exited() or not AuditRecord.objects.unsealed().exists()

        assert wait_for(all_sealed, timeout=120, interval=0.5), f"not sealed:\n{worker.tail()}"
        assert not worker.exited(), f"the worker exited:\n{worker.tail()}"
        # Records written while it runs are sealed by a later tick, after the first ones.
        first_count = AuditRecord.objects.filter(team=team).count()
        append(team, 3)
        assert wait_for(all_sealed, timeout=120, interval=0.5), f"not sealed:\n{worker.tail()}"

    total = AuditRecord.objects.filter(team=team).count()
    assert total == first_count + 3
    assert sealed_seqs(team) == list(range(1, total + 1))
    assert chain_verify(team=team).intact and chain_verify(team=other_team).intact
    assert "audit.tasks.seal_audit_records" in worker.output()
