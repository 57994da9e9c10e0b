from django.core.management.base import CommandError

from audit.doors import AuditedCommand
from plans.keys import EncryptionKeyError, signing_keys_reencrypt


class Command(AuditedCommand):
    help = (
        "Re-encrypt every stored private signing key under the first (newest) "
        "KEY_ENCRYPTION_KEY; afterwards the older encryption keys can be removed."
    )

    def handle(self, *args, **options) -> None:
        try:
            count = signing_keys_reencrypt()
        except EncryptionKeyError as exc:
            raise CommandError(f"nothing re-encrypted: {exc}") from exc
        self.stdout.write(f"re-encrypted {count} signing key(s) under the newest encryption key")
