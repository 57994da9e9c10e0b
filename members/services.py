"""Writes for teams, members, agents and API keys. Views, admin and commands call these."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from controlplane.problems import DomainError

from .models import Agent, ApiKey, Group, Member, Role, Team, email_normalize

API_KEY_PREFIX = "pg_"
LOOKUP_ID_LENGTH = 12
_HEX_DIGITS = "0123456789abcdef"
DEFAULT_TEAM_SLUG = "default"

logger = logging.getLogger(__name__)


def team_get_or_create(*, slug: str = DEFAULT_TEAM_SLUG, name: str | None = None) -> Team:
    team, _ = Team.objects.get_or_create(slug=slug, defaults={"name": name or slug.title()})
    return team


def member_upsert(
    *,
    team: Team,
    email: str,
    name: str | None = None,
    role: str | None = None,
    groups: Iterable[str] | None = None,
    is_active: bool | None = None,
) -> Member:
    """Create the member, or update the given fields of an existing one (e-mail is matched
    case-insensitively). Missing roles and groups are created in the member's team."""
    with transaction.atomic():
        member = Member.objects.for_email(team, email).select_for_update().first()
        if member is None:
            member = Member(team=team, email=email_normalize(email))
        if name is not None:
            member.name = name
        if role is not None:
            member.role = Role.objects.get_or_create(team=team, name=role)[0] if role else None
        if is_active is not None:
            member.is_active = is_active
        member.full_clean(exclude=["role"])
        member.save()
        if groups is not None:
            member.groups.set(
                [Group.objects.get_or_create(team=team, name=group)[0] for group in groups]
            )
    return member


def member_disable(*, team: Team, email: str) -> Member:
    with transaction.atomic():
        member = Member.objects.for_email(team, email).select_for_update().first()
        if member is None:
            raise DomainError("unknown_user", f"{email} is not a member of team {team.slug}.")
        if member.is_active:
            member.is_active = False
            member.save(update_fields=["is_active"])
    return member


def agent_require_active(*, agent: Agent) -> None:
    """DomainError ``agent_disabled`` unless the agent is active: the one refusal of a
    disabled agent, made by the API before any work and by the plan services for any
    other caller."""
    if not agent.is_active:
        raise DomainError("agent_disabled", f"Agent {agent.name} is disabled.")


def agent_create(*, team: Team, name: str, policy) -> Agent:
    if policy.team_id != team.pk:
        raise ValueError("the policy belongs to another team")
    return Agent.objects.create(team=team, name=name, policy=policy)


def _hash_secret(secret: str) -> str:
    """Keyed hash of an API key's secret part. The key derives from SECRET_KEY, so a
    database dump alone cannot be used to test guesses offline."""
    pepper = hmac.new(settings.SECRET_KEY.encode(), b"plangate.api-key.v1", hashlib.sha256).digest()
    return hmac.new(pepper, secret.encode(), hashlib.sha256).hexdigest()


def api_key_create(
    *, agent: Agent, name: str = "", expires_at: datetime | None = None
) -> tuple[ApiKey, str]:
    """Create a key and return it with its plaintext, which is shown once and never stored."""
    lookup_id = secrets.token_hex(LOOKUP_ID_LENGTH // 2)
    secret = secrets.token_urlsafe(32)
    api_key = ApiKey.objects.create(
        agent=agent,
        name=name,
        lookup_id=lookup_id,
        secret_hash=_hash_secret(secret),
        expires_at=expires_at,
    )
    return api_key, f"{API_KEY_PREFIX}{lookup_id}_{secret}"


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    api_key.refresh_from_db(fields=["revoked_at"])
    return api_key


def api_key_authenticate(plaintext: str) -> ApiKey:
    """The usable key for ``plaintext``, or DomainError ``invalid_api_key``."""
    invalid = DomainError("invalid_api_key", "The API key is missing, unknown, revoked or expired.")
    if not plaintext.startswith(API_KEY_PREFIX):
        raise invalid
    lookup_id, _, secret = plaintext[len(API_KEY_PREFIX) :].partition("_")
    # Only lowercase hex ever names a key; other text (NUL included, which PostgreSQL cannot
    # even compare) is refused before the query.
    if len(lookup_id) != LOOKUP_ID_LENGTH or not secret or lookup_id.strip(_HEX_DIGITS):
        raise invalid
    # get() rather than first(): lookup_id is unique, and no ORDER BY is needed. A revoked
    # or expired key is not found, the same answer as an unknown one.
    try:
        api_key = (
            ApiKey.objects.usable(timezone.now())
            .select_related("agent", "agent__team", "agent__policy")
            .get(lookup_id=lookup_id)
        )
    except ApiKey.DoesNotExist:
        raise invalid from None
    if not hmac.compare_digest(api_key.secret_hash, _hash_secret(secret)):
        raise invalid
    return api_key


def api_key_touch(*, api_key: ApiKey, now: datetime | None = None) -> None:
    """Record use at most once per interval: one conditional UPDATE, not a write per request."""
    now = now or timezone.now()
    interval = timedelta(seconds=settings.PLANGATE_API_KEY_TOUCH_INTERVAL)
    if api_key.last_used_at is not None and now - api_key.last_used_at < interval:
        return
    try:
        ApiKey.objects.filter(pk=api_key.pk).exclude(last_used_at__gt=now - interval).update(
            last_used_at=now
        )
    except DatabaseError as exc:
        # Bookkeeping after the call's own work has committed: failing here would answer an
        # error for a plan that was stored, and the agent's retry would declare it twice.
        logger.warning("could not record the last use of API key %s: %s", api_key.lookup_id, exc)
        return
    api_key.last_used_at = now
