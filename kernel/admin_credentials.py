"""The admin of a credential whose secret is shown once and that can then only be revoked
(API keys, audit tokens): its prefix and dates as columns, its "Revoke" object action while
it is not revoked, and what the revoke action does once confirmed. The page that creates
one is ``kernel.admin_secrets.shown_once_view``.

The model has ``prefix``, ``created_at``, ``last_used_at``, ``revoked_at`` and
``is_revoked()`` (``kernel.credentials`` keeps their secrets).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

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


class SuperuserTokenAdmin(RevocableCredentialAdmin):
    """A team's bearer token that only superusers see, create (shown once) and revoke: an
    admin API token, a SCIM token. A subclass names its ``noun``, its creation ``form``
    (a ``team`` field and what ``token_create`` reads), its templates, and calls its
    services in ``token_create`` and ``token_revoke``. Listed before
    ``PlangateModelAdmin`` among an admin's bases."""

    noun = "token"
    form_class: Any = None
    form_template = ""
    created_template = ""
    actions = ["revoke_tokens"]
    object_actions = {"revoke_tokens": "Revoke this token"}
    # The columns and fields every team token has; a token with more adds its own.
    list_display: Any = [
        "prefix_shown",
        "name",
        "team",
        "created",
        "created_by",
        "last_used",
        "state",
    ]
    list_filter = [("team", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["lookup_id", "name"]
    list_select_related = ["team"]
    fields: ClassVar[tuple[str, ...]] = (
        "prefix_shown",
        "name",
        "team",
        "created_at",
        "created_by",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = fields

    def token_create(self, data: dict[str, Any]) -> tuple[Any, str]:
        raise NotImplementedError

    def token_revoke(self, token: Any) -> bool:
        raise NotImplementedError

    def _superuser(self, request: HttpRequest) -> bool:
        return bool(getattr(request.user, "is_superuser", False))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._superuser(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._superuser(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._superuser(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_revoke_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._superuser(request)

    @admin.display(description="state")
    def state(self, token: Any) -> str:
        state = "revoked" if token.is_revoked() else "active"
        return format_html('<span class="plangate-badge {}">{}</span>', state, state)

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: Any = None):
        from django.core.exceptions import PermissionDenied
        from django.urls import reverse

        from .admin_actions import OneTimeFormToken
        from .admin_secrets import shown_once_view

        if not self.has_add_permission(request):
            raise PermissionDenied
        opts = self.model._meta

        def create(data: dict[str, Any]) -> tuple[Any, str]:
            token, plaintext = self.token_create(data)
            self.log_addition(request, token, f"Created {self.noun} {token.prefix}.")
            return token, plaintext

        return shown_once_view(
            self,
            request,
            form=self.form_class(request.POST if request.method == "POST" else None),
            form_token=OneTimeFormToken(f"{opts.app_label}-{opts.model_name}-create"),
            credential_name="token",
            create=create,
            form_template=self.form_template,
            created_template=self.created_template,
            context={
                "title": f"Create {'an' if self.noun[0] in 'aeiou' else 'a'} {self.noun}",
                "back_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
                "submit_label": f"Create {self.noun}",
            },
            created_context=lambda token: {
                "title": f"{self.noun[0].upper()}{self.noun[1:]} for {token.team.slug}",
                "token": token,
                "back_label": f"Done, back to the {self.noun}s",
            },
        )

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet, next_url: str = ""):
        from .admin_actions import confirm_action

        confirmation = confirm_action(
            self,
            request,
            queryset,
            action="revoke_tokens",
            next_url=next_url,
            title=f"Revoke {self.noun}s",
            question=f"Revoke these {self.noun}s? Every request made with them is refused "
            "from now on.",
            button="Yes, revoke",
            warning="This cannot be undone: whatever uses them needs a new token.",
        )
        if confirmation is not None:
            return confirmation

        def revoke(token: Any) -> bool:
            if not self.token_revoke(token):
                return False
            self.log_change(request, token, "Revoked.")
            return True

        return self.credentials_revoke(request, queryset, revoke=revoke, plural="tokens")
