from django.core.management.base import CommandError

from audit.doors import AuditedCommand
from plans.models import Plan
from plans.services import plan_revoke


class Command(AuditedCommand):
    help = (
        "Revoke a plan: its next refresh answers 410 plan_revoked. Who revoked is this "
        "command (or --actor), kept on the plan and in the audit trail with --reason."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("plan_id", help="the plan id (a ULID), as the admin shows it")
        parser.add_argument("--reason", default="", help="why, for the auditors and the agent")

    def handle(self, *args, plan_id: str, reason: str, **options) -> None:
        plan = Plan.objects.filter(pk=plan_id.strip().upper()).first()
        if plan is None:
            raise CommandError(f"no plan {plan_id!r}")
        if not plan_revoke(plan=plan, reason=reason):
            raise CommandError(f"plan {plan.pk} was already revoked")
        self.stdout.write(
            f"revoked {plan.pk} at {plan.revoked_at:%Y-%m-%dT%H:%M:%SZ} by {plan.revoked_by}"
        )
