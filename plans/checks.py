"""System checks that tell an operator what would stop signing, before a request does.

Registered when the app is ready (``PlansConfig.ready``). The ids are stable: plangate.E001
(KEY_ENCRYPTION_KEY), E002 (token lifetimes), E003 (the rotation and sweep schedule).
"""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register

from .keys import EncryptionKeyError, encryption_key_problem, encryption_keys


@register()
def check_key_encryption_key(app_configs, **kwargs) -> list[Error]:
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
    # Reads the active and next keys when the database answers and is migrated; skipped
    # silently otherwise (see encryption_key_problem).
    problem = encryption_key_problem()
    if problem is not None:
        return [
            Error(
                problem,
                hint="Set KEY_ENCRYPTION_KEY to the key the signing keys were stored under; "
                "when changing it, list the new key first and keep the old one until "
                "`manage.py reencrypt_keys` has run. If the old key is lost, see "
                "docs/keys.md (revoke the keys, then rotate).",
                id="plangate.E001",
            )
        ]
    return []


@register()
def check_key_rotation_schedule(app_configs, **kwargs) -> list[Error]:
    rotation = settings.KEY_ROTATION_SECONDS
    jwks_max_age = settings.PLANGATE_JWKS_MAX_AGE
    sweep = settings.PLAN_EXPIRY_SWEEP_SECONDS
    errors = []
    if jwks_max_age < 0:
        errors.append(
            Error(
                f"PLANGATE_JWKS_MAX_AGE must be 0 or more (got {jwks_max_age}).", id="plangate.E003"
            )
        )
    if rotation <= 0:
        errors.append(
            Error(f"KEY_ROTATION_SECONDS must be positive (got {rotation}).", id="plangate.E003")
        )
    elif rotation < jwks_max_age:
        errors.append(
            Error(
                f"KEY_ROTATION_SECONDS ({rotation}) is shorter than the JWKS cache lifetime "
                f"PLANGATE_JWKS_MAX_AGE ({jwks_max_age}): a next key must be published for one "
                "cache lifetime before it signs, so rotations would be skipped.",
                hint="Rotate less often or let verifiers cache the JWKS for less time.",
                id="plangate.E003",
            )
        )
    if sweep <= 0:
        errors.append(
            Error(f"PLAN_EXPIRY_SWEEP_SECONDS must be positive (got {sweep}).", id="plangate.E003")
        )
    if settings.PLANGATE_CLOCK_SKEW < 0:
        errors.append(
            Error(
                f"PLANGATE_CLOCK_SKEW must be 0 or more (got {settings.PLANGATE_CLOCK_SKEW}).",
                id="plangate.E003",
            )
        )
    return errors


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
