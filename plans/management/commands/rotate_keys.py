from django.core.management.base import CommandError

from audit.doors import AuditedCommand
from plans.keys import EncryptionKeyError, RotationResult, signing_key_rotate


class Command(AuditedCommand):
    help = (
        "Rotate the signing keys now: retire the active key, activate the next one, publish "
        "a new next key, delete retired keys whose tokens have all expired."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--if-due",
            action="store_true",
            help="skip unless a rotation is due (the active key was activated "
            "KEY_ROTATION_SECONDS ago or more), as the scheduled rotation does (for cron "
            "instead of Celery beat)",
        )

    def handle(self, *args, if_due: bool, **options) -> None:
        try:
            result = signing_key_rotate(force=not if_due)
        except EncryptionKeyError as exc:
            raise CommandError(f"not rotated: {exc}") from exc
        line = result.describe()
        if result.outcome == RotationResult.NEXT_KEY_TOO_YOUNG:
            line += " (to stop a key signing at once, use revoke_key)"
        self.stdout.write(line)
