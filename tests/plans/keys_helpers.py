"""Helpers for the signing-key tests: ageing keys instead of waiting, reading states."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import F

from plans.models import SigningKey

# Fernet keys for tests only (the first one is tests/settings.py's).
TEST_ENCRYPTION_KEY = "dGVzdC1rZXktZW5jcnlwdGlvbi1rZXktMzJieXRlcyE="
OTHER_ENCRYPTION_KEY = "b3RoZXIta2V5LWVuY3J5cHRpb24ta2V5LTMyYnl0ZXM="
THIRD_ENCRYPTION_KEY = "dGhpcmQta2V5LWVuY3J5cHRpb24ta2V5LTMyYnl0ZXM="


def age_keys(seconds: float) -> None:
    """Move every key's timestamps into the past, as if ``seconds`` had gone by."""
    delta = timedelta(seconds=seconds)
    SigningKey.objects.update(created_at=F("created_at") - delta)
    for column in ("activated_at", "retired_at", "revoked_at"):
        SigningKey.objects.filter(**{f"{column}__isnull": False}).update(
            **{column: F(column) - delta}
        )


def kid_in(state: str) -> str | None:
    return SigningKey.objects.filter(state=state).values_list("kid", flat=True).first()


def states() -> dict[str, str]:
    return dict(SigningKey.objects.values_list("kid", "state"))


def snapshot() -> list[tuple]:
    """Every key row as it is stored, to prove a refused call wrote nothing."""
    return list(SigningKey.objects.order_by("kid").values_list())
