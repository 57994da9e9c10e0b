"""Single sign-on to the console with OpenID Connect (mozilla-django-oidc, decision 0083).

Configured by three variables: OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET. The
provider's endpoints are read from ``{issuer}/.well-known/openid-configuration`` when first
needed (cached OIDC_DISCOVERY_CACHE_SECONDS), never at start-up, so a provider that is down
stops sign-in, not the server.

Who may use the console, and as what, comes from one claim (OIDC_ROLE_CLAIM, ``groups`` by
default) and the operator's map, OIDC_ROLE_MAP: ``value=role[:team],...``. A ``role`` is a
console role: ``team_admin``, ``auditor``, ``approver``, ``key_operator`` or ``superuser``;
``team`` the slug of the team it is granted in (team roles need one). At each sign-in the
roles and teams the map names are set from the claim, added and removed; anything the map
does not name is left as an administrator set it. A person the map grants nothing is
refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from mozilla_django_oidc.utils import import_from_settings

#: the mozilla-django-oidc setting each discovery document member fills
ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
#: console roles and the permission groups that hold them (data migrations create them)
CONSOLE_ROLES = {
    "team_admin": "Team admins",
    "auditor": "Auditors",
    "approver": "Approvers",
    "key_operator": "Key operators",
}
SUPERUSER = "superuser"


class DiscoveryFailed(ImproperlyConfigured):
    """The issuer's discovery document could not be read or does not describe it."""


def oidc_enabled() -> bool:
    return bool(settings.OIDC_ISSUER)


def password_login_enabled() -> bool:
    return bool(settings.PASSWORD_LOGIN) or not oidc_enabled()


def discovery() -> dict[str, Any]:
    """The issuer's OpenID Provider metadata (OpenID Connect Discovery 1.0)."""
    issuer = str(settings.OIDC_ISSUER).rstrip("/")
    key = f"plangate:oidc-discovery:{issuer}"
    document = cache.get(key)
    if document is None:
        import httpx  # only here: the server loads no HTTP client until a sign-in needs one

        url = f"{issuer}/.well-known/openid-configuration"
        try:
            response = httpx.get(url, timeout=10, follow_redirects=False)
            response.raise_for_status()
            document = response.json()
        except (httpx.HTTPError, ValueError) as error:
            raise DiscoveryFailed(f"cannot read {url}: {error}") from error
        if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != issuer:
            raise DiscoveryFailed(f"{url} describes another issuer, or none")
        missing = [name for name in ENDPOINTS.values() if not document.get(name)]
        if missing:
            raise DiscoveryFailed(f"{url} names no {', '.join(missing)}")
        cache.set(key, document, settings.OIDC_DISCOVERY_CACHE_SECONDS)
    return document


def oidc_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, the provider's endpoints read from discovery."""
    if attr in ENDPOINTS:
        return discovery()[ENDPOINTS[attr]]
    return import_from_settings(attr, *default)


@dataclass(frozen=True)
class RoleGrant:
    value: str
    role: str
    team: str | None


def role_map() -> list[RoleGrant]:
    """OIDC_ROLE_MAP, parsed; ImproperlyConfigured naming a bad entry (the system check
    reports it at start-up)."""
    grants = []
    for entry in str(settings.OIDC_ROLE_MAP).split(","):
        entry = entry.strip()
        if not entry:
            continue
        value, _, target = entry.partition("=")
        role, _, team_slug = target.partition(":")
        role = role.strip()
        team = team_slug.strip() or None
        if not value.strip() or (role not in CONSOLE_ROLES and role != SUPERUSER):
            raise ImproperlyConfigured(
                f"OIDC_ROLE_MAP: {entry!r} is not value=role[:team] with a role among "
                f"{', '.join([*CONSOLE_ROLES, SUPERUSER])}"
            )
        if role in CONSOLE_ROLES and role != "key_operator" and team is None:
            raise ImproperlyConfigured(f"OIDC_ROLE_MAP: {entry!r} needs a team (role:team)")
        grants.append(RoleGrant(value=value.strip(), role=role, team=team))
    return grants


def claim_values(claims: dict[str, Any]) -> set[str]:
    value = claims.get(settings.OIDC_ROLE_CLAIM)
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return {str(item) for item in value}
    return set()


def grants_for(claims: dict[str, Any]) -> list[RoleGrant]:
    values = claim_values(claims)
    return [grant for grant in role_map() if grant.value in values]


def console_access_apply(user: Any, claims: dict[str, Any]) -> None:
    """Set what the map governs of ``user`` from ``claims``: the console roles it names, the
    teams it names, superuser when it names it; staff when anything is granted."""
    from django.contrib.auth.models import Group as PermissionGroup

    from teams.models import Team

    everything = role_map()
    granted = grants_for(claims)
    governed_roles = {
        CONSOLE_ROLES[grant.role] for grant in everything if grant.role in CONSOLE_ROLES
    }
    wanted_roles = {CONSOLE_ROLES[grant.role] for grant in granted if grant.role in CONSOLE_ROLES}
    for group in PermissionGroup.objects.filter(name__in=governed_roles):
        if group.name in wanted_roles:
            user.groups.add(group)
        else:
            user.groups.remove(group)
    governed_teams = {grant.team for grant in everything if grant.team}
    wanted_teams = {grant.team for grant in granted if grant.team}
    for team in Team.objects.filter(slug__in=governed_teams):
        if team.slug in wanted_teams:
            team.staff.add(user)
        else:
            team.staff.remove(user)
    if any(grant.role == SUPERUSER for grant in everything):
        user.is_superuser = any(grant.role == SUPERUSER for grant in granted)
    user.is_staff = bool(granted) or user.is_superuser
    user.save(update_fields=["is_staff", "is_superuser"])
