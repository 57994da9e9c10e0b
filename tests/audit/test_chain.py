"""Sealing chains each team's records in order; verify_audit finds the first record that a
database administrator changed, deleted or moved."""

from __future__ import annotations

import hashlib
import io
import itertools
import json

import pytest
from django.core.management import CommandError, call_command

from audit.chain import GENESIS_PREV_HASH, record_canonical, record_hash
from audit.models import AuditChainHead, AuditRecord
from audit.services import records_seal
from audit.verification import chain_verify
from guard.canonical import canonical_json

from .helpers import append, record_id_at, sealed_seqs, sql

TABLE = AuditRecord._meta.db_table


def verify(*arguments: str) -> tuple[str, str]:
    """verify_audit's (stdout, stderr); raises CommandError when it exits non-zero."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("verify_audit", *arguments, stdout=out, stderr=err)
    except CommandError:
        raise CommandError(err.getvalue()) from None
    return out.getvalue(), err.getvalue()


def broken_line(*arguments: str) -> str:
    with pytest.raises(CommandError) as failure:
        verify(*arguments)
    return str(failure.value)


@pytest.fixture
def chained(team):
    """A team whose trail holds eight sealed records, whatever its setup appended."""
    append(team, 8)
    records_seal()
    assert AuditRecord.objects.unsealed().count() == 0
    return team


def test_sealing_numbers_each_teams_records_from_one_and_links_each_to_the_one_before(
    team, other_team
):
    mine = append(team, 5)
    theirs = append(other_team, 3)
    result = records_seal()

    assert result.sealed == AuditRecord.objects.count()
    assert set(result.teams) == {team.pk, other_team.pk}
    for owner, appended in ((team, mine), (other_team, theirs)):
        records = list(AuditRecord.objects.filter(team=owner).order_by("seq"))
        assert [r.seq for r in records] == list(range(1, len(records) + 1))
        # In the order they were appended (id order).
        assert [r.pk for r in records] == sorted(r.pk for r in records)
        assert records[0].prev_hash == GENESIS_PREV_HASH
        for before, after in itertools.pairwise(records):
            assert after.prev_hash == before.hash
        for record in records:
            assert record.hash == hashlib.sha256(record_canonical(record)).hexdigest()
            assert len(record.hash) == 64 and record.hash == record.hash.lower()
            assert record.sealed_at is not None
        head = AuditChainHead.objects.get(team=owner)
        assert (head.last_seq, head.last_hash) == (records[-1].seq, records[-1].hash)
        assert {r.pk for r in appended} <= {r.pk for r in records}


def test_records_appended_later_continue_the_chain_where_the_head_ends(chained):
    head = AuditChainHead.objects.get(team=chained)
    later = append(chained, 2)
    records_seal(team=chained)
    later_sealed = list(AuditRecord.objects.filter(pk__in=[r.pk for r in later]).order_by("seq"))
    assert [r.seq for r in later_sealed] == [head.last_seq + 1, head.last_seq + 2]
    assert later_sealed[0].prev_hash == head.last_hash


def test_sealing_again_changes_nothing(chained):
    before = list(AuditRecord.objects.values_list("pk", "seq", "hash"))
    result = records_seal()
    assert (result.sealed, result.teams, result.pending) == (0, (), False)
    assert list(AuditRecord.objects.values_list("pk", "seq", "hash")) == before


def test_a_limit_seals_the_oldest_records_and_says_more_are_waiting(team):
    append(team, 6)
    total = AuditRecord.objects.filter(team=team).count()
    result = records_seal(team=team, limit=total - 2)
    assert (result.sealed, result.pending) == (total - 2, True)
    assert AuditRecord.objects.unsealed().filter(team=team).count() == 2
    unsealed_ids = set(AuditRecord.objects.unsealed().values_list("pk", flat=True))
    assert min(unsealed_ids) > max(
        AuditRecord.objects.sealed().values_list("pk", flat=True)
    )  # oldest first
    assert records_seal(team=team).sealed == 2
    assert sealed_seqs(team) == list(range(1, total + 1))


def test_the_hash_is_sha256_of_the_rfc8785_document_an_auditor_reads(team):
    (record,) = append(team, 1, details={"b": [1, 2], "a": "é"})
    records_seal()
    record.refresh_from_db()
    document = json.loads(record_canonical(record))
    assert document == {
        "format": 2,
        "teamId": team.pk,
        "seq": record.seq,
        "prevHash": record.prev_hash,
        "at": record.at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "kind": "decision",
        "actor": "agent:7",
        "agent": {"id": "01JAGENT000000000000000007", "name": "summariser"},
        "user": "alice@acme.dev",
        "planId": "01JABCDEFGHJKMNPQRSTVWXYZ0",
        "planHash": "ab" * 32,
        "policy": {"id": "default", "version": 3},
        "code": "allowed",
        "rule": {"index": 0, "description": "read issues"},
        "details": {"a": "é", "b": [1, 2]},
    }
    assert record_canonical(record) == canonical_json(document)
    assert record.hash == record_hash(record)


def test_a_record_of_format_1_hashes_without_format_and_still_verifies(team):
    """Records written before the format was kept (format 1) hash as they always did; the
    chain mixes both formats."""
    old, new = append(team, 2)
    AuditRecord.objects.filter(pk=old.pk).update(format=1)
    records_seal()
    old.refresh_from_db()
    new.refresh_from_db()
    assert "format" not in json.loads(record_canonical(old))
    assert json.loads(record_canonical(new))["format"] == 2
    assert chain_verify(team=team).intact
    AuditRecord.objects.filter(pk=new.pk).update(format=3)
    assert chain_verify(team=team).broken.problem == "changed"


def test_details_that_rfc8785_cannot_write_are_still_sealed_and_verified(team):
    append(team, 1, details={"huge": 2**60})
    records_seal()
    assert chain_verify(team=team).intact


def test_an_intact_trail_passes_and_counts_what_is_not_sealed_yet(chained, other_team):
    append(chained, 3)
    out, _ = verify()
    assert f"team {chained.slug}: {AuditRecord.objects.sealed().filter(team=chained).count()}" in (
        out
    )
    assert "chain intact" in out and "3 not sealed yet" in out
    assert "every chain is intact" in out
    assert verify("--team", chained.slug)[0].count("team ") >= 1


def test_an_unknown_team_is_refused(db):
    with pytest.raises(CommandError, match="no team 'nope'"):
        call_command("verify_audit", "--team", "nope", stdout=io.StringIO())


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("kind", "plan_revoked"),
        ("actor", "someone else"),
        ("agent_name", "other-bot"),
        ('"user"', "mallory@acme.dev"),
        ("plan_id", "01JZZZZZZZZZZZZZZZZZZZZZZZ"),
        ("plan_hash", "cd" * 32),
        ("policy", "lenient"),
        ("policy_version", 4),
        ("code", "policy_denied"),
        ("details", '{"n": 99}'),
        ("rule", '{"index": 1, "description": "read issues"}'),
    ],
)
def test_an_edited_record_is_named_as_changed(chained, column, value):
    victim = record_id_at(chained, 4)
    sql(f"UPDATE {TABLE} SET {column} = %s WHERE id = %s", [value, victim])  # noqa: S608
    line = broken_line()
    assert f"team {chained.slug}: chain broken at seq 4, id {victim}: changed" in line


def test_an_edited_time_is_named_as_changed(chained):
    victim = record_id_at(chained, 2)
    record = AuditRecord.objects.get(pk=victim)
    AuditRecord.objects.filter(pk=victim).update(at=record.at.replace(microsecond=1))
    assert f"chain broken at seq 2, id {victim}: changed" in broken_line()


def test_a_record_moved_to_another_team_shows_as_deleted_from_its_own(chained, other_team):
    victim = record_id_at(chained, 5)
    sql(f"UPDATE {TABLE} SET team_id = %s WHERE id = %s", [other_team.pk, victim])  # noqa: S608
    line = broken_line("--team", chained.slug)
    assert f"team {chained.slug}: chain broken at seq 5: deleted" in line


def test_a_deleted_record_is_named_by_the_seq_that_is_missing(chained):
    after = record_id_at(chained, 4)
    sql(f"DELETE FROM {TABLE} WHERE id = %s", [record_id_at(chained, 3)])  # noqa: S608
    line = broken_line()
    assert "chain broken at seq 3: deleted: seq 3 missing" in line
    assert f"the next record is seq 4 (id {after})" in line


def test_a_deletion_renumbered_to_close_the_gap_is_named_as_reordered(chained):
    sql(f"DELETE FROM {TABLE} WHERE id = %s", [record_id_at(chained, 3)])  # noqa: S608
    last = AuditChainHead.objects.get(team=chained).last_seq
    for seq in range(4, last + 1):
        sql(
            f"UPDATE {TABLE} SET seq = seq - 1 WHERE team_id = %s AND seq = %s",  # noqa: S608
            [chained.pk, seq],
        )
    moved = record_id_at(chained, 3)
    assert f"chain broken at seq 3, id {moved}: reordered" in broken_line()


def test_two_swapped_records_are_named_as_reordered(chained):
    third, fourth = record_id_at(chained, 3), record_id_at(chained, 4)
    # Swap their places in the chain (seq is unique per team: through a free number).
    sql(f"UPDATE {TABLE} SET seq = %s WHERE id = %s", [10**12, third])  # noqa: S608
    sql(f"UPDATE {TABLE} SET seq = 3 WHERE id = %s", [fourth])  # noqa: S608
    sql(f"UPDATE {TABLE} SET seq = 4 WHERE id = %s", [third])  # noqa: S608
    assert f"chain broken at seq 3, id {fourth}: reordered" in broken_line()


def test_swapped_contents_are_named_where_they_no_longer_hash(chained):
    third, fourth = (AuditRecord.objects.get(pk=record_id_at(chained, n)) for n in (3, 4))
    sql(
        f"UPDATE {TABLE} SET details = %s WHERE id = %s",  # noqa: S608
        [json.dumps(fourth.details), third.pk],
    )
    sql(
        f"UPDATE {TABLE} SET details = %s WHERE id = %s",  # noqa: S608
        [json.dumps(third.details), fourth.pk],
    )
    assert f"chain broken at seq 3, id {third.pk}: changed" in broken_line()


def test_an_edit_whose_hash_was_recomputed_breaks_the_link_to_the_next_record(chained):
    victim = AuditRecord.objects.get(pk=record_id_at(chained, 5))
    victim.user = "mallory@acme.dev"
    sql(
        f'UPDATE {TABLE} SET "user" = %s, hash = %s WHERE id = %s',  # noqa: S608
        [victim.user, record_hash(victim), victim.pk],
    )
    following = record_id_at(chained, 6)
    assert f"chain broken at seq 6, id {following}: reordered" in broken_line()


def test_a_truncated_tail_is_named_by_the_first_missing_seq(chained):
    last = AuditChainHead.objects.get(team=chained).last_seq
    sql(
        f"DELETE FROM {TABLE} WHERE team_id = %s AND seq >= %s",  # noqa: S608
        [chained.pk, last - 1],
    )
    line = broken_line()
    assert f"chain broken at seq {last - 1}: deleted" in line
    assert f"seq {last - 1} to {last} are missing (a deleted tail)" in line


def test_a_deleted_chain_head_is_reported(chained):
    AuditChainHead.objects.filter(team=chained).delete()
    assert "chain head is missing" in broken_line()


def test_a_broken_team_does_not_hide_the_others(chained, other_team):
    append(other_team, 2)
    records_seal()
    sql(f"DELETE FROM {TABLE} WHERE id = %s", [record_id_at(chained, 2)])  # noqa: S608
    with pytest.raises(CommandError):
        out = io.StringIO()
        call_command("verify_audit", stdout=out, stderr=io.StringIO())
    assert f"team {other_team.slug}:" in out.getvalue()
    assert "chain intact" in out.getvalue()
