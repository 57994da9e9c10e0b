import json

from django.core.management.base import BaseCommand

from guard.utc import isoformat_z
from plans.keys import published_keys
from plans.models import SigningKey


def _iso(value) -> str | None:
    return isoformat_z(value) if value else None


class Command(BaseCommand):
    help = 'List signing keys, oldest first; --json prints [{"kid", "state", "createdAt", ...}].'
    # Reading the keys must work while KEY_ENCRYPTION_KEY is broken, to diagnose it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="machine-readable output"
        )

    def handle(self, *args, as_json: bool, **options) -> None:
        keys = list(SigningKey.objects.order_by("created_at", "kid"))
        if as_json:
            self.stdout.write(_dumps(keys))
            return
        published = set(published_keys().values_list("kid", flat=True))
        rows: list[tuple[str, ...]] = [
            ("kid", "state", "created", "activated", "retired", "revoked", "in JWKS")
        ]
        for key in keys:
            rows.append(
                (
                    key.kid,
                    key.state,
                    *(
                        f"{moment:%Y-%m-%d %H:%M:%S}" if moment else "-"
                        for moment in (
                            key.created_at,
                            key.activated_at,
                            key.retired_at,
                            key.revoked_at,
                        )
                    ),
                    "yes" if key.kid in published else "no",
                )
            )
        widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
        for row in rows:
            self.stdout.write(
                "  ".join(
                    cell.ljust(width) for cell, width in zip(row, widths, strict=True)
                ).rstrip()
            )


def _dumps(keys: list[SigningKey]) -> str:
    return json.dumps(
        [
            {
                "kid": key.kid,
                "state": key.state,
                "createdAt": _iso(key.created_at),
                "activatedAt": _iso(key.activated_at),
                "retiredAt": _iso(key.retired_at),
            }
            for key in keys
        ]
    )
