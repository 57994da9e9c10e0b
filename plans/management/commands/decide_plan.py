from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from audit.doors import AuditedCommand
from kernel.problems import DomainError
from plans.approvals import plan_approval_decide
from plans.models import Plan


class Command(AuditedCommand):
    help = (
        "Approve or deny a plan that waits for a person's approval, as the person whose"
        " e-mail --by names: one of the people asked to decide it (a superuser, or staff of"
        " the plan's team allowed to decide approvals), never the plan's own member."
        " A denial needs --reason, which the agent shows its user."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("plan_id", help="the plan id (a ULID), as the admin shows it")
        parser.add_argument("decision", choices=["approve", "deny"])
        parser.add_argument("--by", required=True, help="the deciding person's e-mail")
        parser.add_argument("--reason", default="", help="why (required to deny)")

    def handle(self, *args, plan_id: str, decision: str, by: str, reason: str, **options) -> None:
        plan = (
            Plan.objects.select_related("team", "agent", "member", "policy_version__policy")
            .filter(pk=plan_id.strip().upper())
            .first()
        )
        if plan is None:
            raise CommandError(f"no plan {plan_id!r}")
        users = list(get_user_model().objects.filter(email__iexact=by.strip())[:2])
        if len(users) != 1:
            raise CommandError(
                f"no user with the e-mail {by!r}"
                if not users
                else f"several users have the e-mail {by!r}; give each their own"
            )
        try:
            result = plan_approval_decide(
                plan=plan, by_user=users[0], approve=decision == "approve", reason=reason
            )
        except DomainError as error:
            raise CommandError(f"{error.code}: {error.detail}") from error
        verb = "approved" if result.approved else "denied"
        self.stdout.write(f"{verb} {plan.pk} at {result.at:%Y-%m-%dT%H:%M:%SZ} by {result.by}")
