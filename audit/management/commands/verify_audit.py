"""``manage.py verify_audit [--team SLUG]``: recompute each team's audit chain from seq 1.

Exits 0 with a summary when every chain is intact, 1 naming each broken team's first bad
record (team, seq, id and whether it was changed, deleted or reordered). Records not sealed
yet are counted either way: the worker seals them within seconds (AUDIT_SEAL_SECONDS).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from audit.verification import chain_verify
from members.models import Team


class Command(BaseCommand):
    help = "Recompute the audit chain of every team (or one) and name the first broken record."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--team", help="the team's slug (default: every team)")

    def handle(self, *args, team: str | None, **options) -> None:
        teams = Team.objects.order_by("slug")
        if team is not None:
            teams = teams.filter(slug=team)
            if not teams.exists():
                raise CommandError(f"no team {team!r}")
        broken = []
        for current in teams:
            report = chain_verify(team=current)
            unsealed = f"; {report.unsealed} not sealed yet" if report.unsealed else ""
            if report.broken is None:
                head = f", last hash {report.last_hash}" if report.sealed else ""
                self.stdout.write(
                    f"team {current.slug}: {report.sealed} records, chain intact{head}{unsealed}"
                )
                continue
            problem = report.broken
            where = f"seq {problem.seq}" + (
                f", id {problem.record_id}" if problem.record_id is not None else ""
            )
            line = (
                f"team {current.slug}: chain broken at {where}: {problem.problem}: "
                f"{problem.explanation} ({report.sealed} records verified before it{unsealed})"
            )
            self.stderr.write(line)
            broken.append(line)
        if broken:
            raise CommandError(f"the audit trail of {len(broken)} team(s) was tampered with")
        self.stdout.write(f"verified {teams.count()} team(s): every chain is intact")
