"""System checks that tell an operator what would stop signing, before a request does."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register


@register()
def check_key_encryption_key(app_configs, **kwargs) -> list[Error]:
    from plans.keys import EncryptionKeyError, encryption_keys

    try:
        encryption_keys()
    except EncryptionKeyError as exc:
        return [
            Error(
                str(exc),
                hint="Generate one with `python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'`; `make run` writes one to var/local.env.",
                id="plangate.E001",
            )
        ]
    return []


@register()
def check_token_lifetimes(app_configs, **kwargs) -> list[Error]:
    low, default, high = (
        settings.PLANGATE_TOKEN_MIN_TTL,
        settings.PLANGATE_TOKEN_TTL,
        settings.PLANGATE_TOKEN_MAX_TTL,
    )
    if not 0 < low <= default <= high <= 3600:
        return [
            Error(
                "Token lifetimes must satisfy 0 < MIN_TTL <= TTL <= MAX_TTL <= 3600 "
                f"(got {low}, {default}, {high}).",
                id="plangate.E002",
            )
        ]
    return []
