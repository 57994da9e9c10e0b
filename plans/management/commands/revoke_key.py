from django.core.management.base import CommandError

from audit.doors import AuditedCommand
from kernel.problems import DomainError
from plans.keys import signing_key_revoke


class Command(AuditedCommand):
    help = (
        "Revoke a signing key at once: it leaves JWKS, its tokens stop verifying and "
        "refreshing; if it was signing, the next key (or a fresh one) signs at once."
    )
    # The emergency door must open even when KEY_ENCRYPTION_KEY is wrong or missing,
    # which the system checks would refuse.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "kid",
            help="the key id, as `list_keys` prints it (one starting with '-' goes after '--')",
        )

    def handle(self, *args, kid: str, **options) -> None:
        try:
            result = signing_key_revoke(kid=kid)
        except DomainError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"revoked {result.kid} at {result.revoked_at:%Y-%m-%dT%H:%M:%SZ}")
        if result.signing is None:
            raise CommandError(
                "no key signs now: KEY_ENCRYPTION_KEY cannot decrypt the remaining keys "
                "(see the log); fix it and run rotate_keys"
            )
        self.stdout.write(f"signing with {result.signing}")
