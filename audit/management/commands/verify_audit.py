"""``manage.py verify_audit [--team SLUG_OR_NAME]``: recompute each team's audit chain from seq 1.

Exits 0 with a summary when every chain is intact, 1 naming each broken team's first bad
record (team, seq, id and whether it was changed, deleted or reordered). Records not sealed
yet are counted either way: the worker seals them within seconds (AUDIT_SEAL_SECONDS).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from audit.verification import chain_report_line, chain_reports_summary, chain_verify
from kernel.problems import DomainError
from teams.models import Team
from teams.selectors import team_require


class Command(BaseCommand):
    help = "Recompute the audit chain of every team (or one) and name the first broken record."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--team", help="the team's slug or name (default: every team)")

    def handle(self, *args, team: str | None, **options) -> None:
        teams = Team.objects.order_by("slug")
        if team is not None:
            try:
                teams = teams.filter(pk=team_require(team).pk)
            except DomainError as exc:
                raise CommandError(exc.detail) from exc
        reports = []
        for current in teams:
            report = chain_verify(team=current)
            reports.append(report)
            # The console's "Verify chain" page shows these same lines (audit.verification).
            if report.intact:
                self.stdout.write(chain_report_line(report))
            else:
                self.stderr.write(chain_report_line(report))
        if not all(report.intact for report in reports):
            raise CommandError(chain_reports_summary(reports))
        self.stdout.write(chain_reports_summary(reports))
