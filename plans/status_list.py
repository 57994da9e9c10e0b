"""The token status list (draft-ietf-oauth-status-list): one signed, cacheable list per
team in which every token's ``status.status_list.idx`` names a bit."""

from __future__ import annotations

from django.conf import settings

__all__ = ["status_list_uri"]


def status_list_uri(team_id: int) -> str:
    """The URI a team's tokens name in ``status.status_list.uri``: the list's address under
    the issuer, and the ``sub`` of the list token served there."""
    return f"{settings.PLANGATE_ISSUER.rstrip('/')}/v1/status-lists/{team_id}"
