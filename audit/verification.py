"""Recomputing a team's chain from its first record: what ``manage.py verify_audit`` reports.

Reads only. The first break in a team's chain is named by team, ``seq`` and id, with what
it means:

* ``changed``: the record's stored hash is not the hash of its content (an edited row);
* ``reordered``: its ``prev_hash`` is not the hash of the record now before it (rows moved,
  or the record before was changed and its hash recomputed);
* a record emptied by retention (``redacted_at``, audit.retention) is checked for its place
  only, and must be of a kind retention removes and counted by a retention record;
* ``deleted``: a ``seq`` is missing, or the head says more records were sealed than exist
  (a deleted tail), or sealed records exist with no head at all.

Checks stop at a team's first break: everything after it is suspect anyway.

Then the tables the console's pages read are held to the trail: each app that owns such a
table registers a check in ``TABLE_CHECKS`` (plans: plans.trail_coverage, for the decision
log, the plans and their tokens), since audit imports no app. A row edited, deleted or
inserted there without its record is named like a broken chain (docs/decisions/0079).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from teams.models import Team

from .chain import GENESIS_PREV_HASH, record_hash
from .models import AuditChainHead, AuditRecord
from .retention import RETAINED_KINDS, redactions_unaccounted

Problem = Literal["changed", "reordered", "deleted"]

VERIFY_CHUNK_SIZE = 2000


@dataclass(frozen=True)
class ChainBreak:
    problem: Problem
    seq: int  # the first seq that does not hold
    record_id: int | None  # the record found there, None when it is missing
    explanation: str


@dataclass(frozen=True)
class TablesReport:
    """What a table check compared (a name of rows -> how many) and what disagrees."""

    checked: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


#: the checks of the tables the pages read against the trail, registered by their apps
TABLE_CHECKS: list[Callable[[Team], TablesReport]] = []


def tables_verify(*, team: Team) -> TablesReport:
    """Every registered table check of ``team``, as one report."""
    checked: dict[str, int] = {}
    problems: list[str] = []
    for check in TABLE_CHECKS:
        report = check(team)
        checked.update(report.checked)
        problems += report.problems
    return TablesReport(checked, problems)


@dataclass(frozen=True)
class ChainReport:
    team: Team
    sealed: int  # records checked
    unsealed: int  # records not sealed yet
    last_hash: str
    broken: ChainBreak | None
    tables: TablesReport = field(default_factory=TablesReport)

    @property
    def intact(self) -> bool:
        return self.broken is None and not self.tables.problems


def chain_verify(*, team: Team) -> ChainReport:
    """`records_chain_verify`, then the tables the pages read against the trail."""
    report = records_chain_verify(team=team)
    return ChainReport(
        report.team,
        report.sealed,
        report.unsealed,
        report.last_hash,
        report.broken,
        tables_verify(team=team),
    )


def records_chain_verify(*, team: Team) -> ChainReport:
    """Recompute ``team``'s chain from seq 1; see the module docstring.

    The head is read first and only records up to its ``seq`` are checked: the sealer
    commits records and head together, so those all existed when the head was read, and
    records a sealer adds while this runs are left for the next check.
    """
    head = AuditChainHead.objects.filter(team=team).first()
    unsealed = AuditRecord.objects.unsealed().filter(team=team).count()
    records = AuditRecord.objects.sealed().filter(team=team)
    if head is not None:
        records = records.filter(seq__lte=head.last_seq)
    expected_seq, prev_hash, checked = 1, GENESIS_PREV_HASH, 0
    first_redacted: int | None = None

    def report(broken: ChainBreak | None) -> ChainReport:
        return ChainReport(team, checked, unsealed, prev_hash, broken)

    for record in records.order_by("seq").iterator(VERIFY_CHUNK_SIZE):
        assert record.seq is not None  # sealed()
        if record.seq != expected_seq:
            missing = (
                f"seq {expected_seq}"
                if record.seq == expected_seq + 1
                else f"seq {expected_seq} to {record.seq - 1}"
            )
            return report(
                ChainBreak(
                    "deleted",
                    expected_seq,
                    None,
                    f"{missing} missing: the next record is seq {record.seq} (id {record.pk})",
                )
            )
        if record.prev_hash != prev_hash:
            return report(
                ChainBreak(
                    "reordered",
                    record.seq,
                    record.pk,
                    f"seq {record.seq} (id {record.pk}) does not follow the record before it: "
                    "its prev_hash is not that record's hash (rows moved, or the record "
                    "before was changed and rehashed)",
                )
            )
        if record.is_redacted():
            # Emptied by retention (audit.retention): its hash cannot be recomputed, its
            # place in the chain is checked; only the kinds retention removes may be.
            first_redacted = first_redacted or record.seq
            if record.kind not in RETAINED_KINDS:
                return report(
                    ChainBreak(
                        "changed",
                        record.seq,
                        record.pk,
                        f"seq {record.seq} (id {record.pk}) was emptied, but retention "
                        f"never removes a {record.kind!r} record",
                    )
                )
        elif record.hash != record_hash(record):
            return report(
                ChainBreak(
                    "changed",
                    record.seq,
                    record.pk,
                    f"seq {record.seq} (id {record.pk}) was changed: its content does not "
                    "hash to its stored hash",
                )
            )
        prev_hash, expected_seq, checked = record.hash, expected_seq + 1, checked + 1
    last_seq = expected_seq - 1
    if head is None:
        # A sealer may have created the head since it was read: then these are new records.
        if last_seq and not AuditChainHead.objects.filter(team=team).exists():
            return report(
                ChainBreak(
                    "deleted",
                    1,
                    None,
                    f"{last_seq} records are sealed but the team's chain head is missing",
                )
            )
    elif head.last_seq > last_seq:
        return report(
            ChainBreak(
                "deleted",
                last_seq + 1,
                None,
                f"the chain head says {head.last_seq} records were sealed; "
                + (
                    f"seq {last_seq + 1} is missing"
                    if head.last_seq == last_seq + 1
                    else f"seq {last_seq + 1} to {head.last_seq} are missing"
                )
                + " (a deleted tail)",
            )
        )
    elif head.last_hash != prev_hash:
        return report(
            ChainBreak(
                "changed",
                last_seq,
                None,
                f"the chain head's hash ({head.last_hash[:12]}…) is not the last record's "
                f"(seq {last_seq}, {prev_hash[:12]}…)",
            )
        )
    unaccounted = redactions_unaccounted(team_id=team.pk) if first_redacted else 0
    if unaccounted:
        return report(
            ChainBreak(
                "changed",
                first_redacted or 1,
                None,
                f"{unaccounted} emptied record(s) that no retention record accounts for",
            )
        )
    return report(None)


def chain_report_line(report: ChainReport) -> str:
    """The one line said of a team's chain, by ``manage.py verify_audit`` and by the
    console's "Verify chain" page."""
    unsealed = f"; {report.unsealed} not sealed yet" if report.unsealed else ""
    tables = _tables_line(report.tables)
    if report.broken is None:
        head = f", last hash {report.last_hash}" if report.sealed else ""
        return (
            f"team {report.team.slug}: {report.sealed} records, chain intact{head}{unsealed}"
            f"{tables}"
        )
    problem = report.broken
    where = f"seq {problem.seq}" + (
        f", id {problem.record_id}" if problem.record_id is not None else ""
    )
    return (
        f"team {report.team.slug}: chain broken at {where}: {problem.problem}: "
        f"{problem.explanation} ({report.sealed} records verified before it{unsealed})"
        f"{tables}"
    )


#: at most this many disagreements are named per team; the count says the rest
TABLE_PROBLEMS_SHOWN = 20


def _tables_line(tables: TablesReport) -> str:
    if not tables.checked and not tables.problems:
        return ""
    counts = ", ".join(f"{count} {name}" for name, count in tables.checked.items())
    if not tables.problems:
        return f"; the tables the pages read agree with the trail ({counts})"
    shown = "; ".join(tables.problems[:TABLE_PROBLEMS_SHOWN])
    more = len(tables.problems) - TABLE_PROBLEMS_SHOWN
    rest = f"; and {more} more" if more > 0 else ""
    return (
        f"; the tables the pages read DISAGREE with the trail ({len(tables.problems)} row(s)): "
        f"{shown}{rest}"
    )


def chain_reports_summary(reports: Sequence[ChainReport]) -> str:
    """The closing line after every team's own: every chain intact, or how many are not."""
    broken = sum(1 for report in reports if not report.intact)
    if broken:
        return f"the audit trail of {broken} team(s) was tampered with"
    return f"verified {len(reports)} team(s): every chain is intact"
