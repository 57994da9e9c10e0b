"""The admin of a credential whose secret is shown once and that can then only be revoked
(API keys, audit tokens): its prefix and dates as columns, its "Revoke" object action while
it is not revoked, and what the revoke action does once confirmed. The page that creates
one is ``kernel.admin_secrets.shown_once_view``.

The model has ``prefix``, ``created_at``, ``last_used_at``, ``revoked_at`` and
``is_revoked()`` (``kernel.credentials`` keeps their secrets).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db import router, transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html

from .admin_actions import redirect_after_action
from .admin_widgets import datetime_column


class RevocableCredentialAdmin(admin.ModelAdmin):
    """Listed before ``PlangateModelAdmin`` among an admin's bases."""

    created = datetime_column("created_at", "created")
    last_used = datetime_column("last_used_at", "last used")

    @admin.display(description="prefix", ordering="lookup_id")
    def prefix_shown(self, credential: Any) -> str:
        return format_html("<code>{}</code>", credential.prefix)

    def object_action_available(self, obj: Any, action_name: str) -> bool:
        return not obj.is_revoked()

    def credentials_revoke(
        self,
        request: HttpRequest,
        queryset: QuerySet,
        *,
        revoke: Callable[[Any], bool],
        plural: str,
    ) -> HttpResponse | None:
        """Revoke the selected credentials not revoked yet, in one transaction, and say which.

        ``revoke(credential)`` calls the service and logs; it answers whether it revoked
        the credential (False: another request did first). ``plural`` names them in the
        message when every one already was ("keys", "tokens").
        """
        revoked = []
        with transaction.atomic(using=router.db_for_write(self.model)):
            for credential in queryset.filter(revoked_at__isnull=True):
                if revoke(credential):
                    revoked.append(credential.prefix)
        if revoked:
            self.message_user(request, f"Revoked {', '.join(revoked)}.")
        else:
            self.message_user(
                request, f"The selected {plural} were already revoked.", messages.INFO
            )
        return redirect_after_action(request)
