"""Admin for the signing keys: browse them, rotate now, revoke.

The keys are audit records too (read-only for everyone, as in ``plans.admin``); the only
writes are ``plans.keys.signing_key_rotate`` and ``signing_key_revoke``, each leaving a
history entry for every key it created or moved. ``plans.admin`` imports this module, so
admin autodiscovery registers it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from kernel.admin_actions import confirm_action, redirect_after_action
from kernel.admin_base import PlangateModelAdmin, ReadOnlyPermissions
from kernel.admin_widgets import datetime_column
from kernel.problems import DomainError
from teams.models import Team, running_agents_stop_within

from . import keys
from .models import SigningKey


@admin.register(SigningKey)
class SigningKeyAdmin(ReadOnlyPermissions, PlangateModelAdmin):
    """Keys are shared by every team. The private half never leaves the database."""

    list_display = ["kid", "state_shown", "created", "activated", "retired", "revoked"]
    list_filter = ["state"]
    search_fields = ["=kid"]
    fields: ClassVar[tuple[str, ...]] = (
        "kid",
        "state",
        "public_key",
        "created_at",
        "activated_at",
        "retired_at",
        "revoked_at",
    )
    readonly_fields = fields
    actions = ["revoke_signing_keys"]
    object_actions = {"revoke_signing_keys": "Revoke this key"}
    change_list_template = "admin/plans/signingkey/change_list.html"
    created = datetime_column("created_at", "created")
    activated = datetime_column("activated_at", "activated")
    retired = datetime_column("retired_at", "retired")
    revoked = datetime_column("revoked_at", "revoked")

    def has_manage_permission(self, request: HttpRequest, obj=None) -> bool:
        """Rotating or revoking a key reaches every team's agents, so ``change_signingkey``
        is held by superusers and "Key operators" only, never by a team role
        (members/migrations/0004_key_operators.py). Read by the rotate view, the revoke
        action and the buttons alike."""
        return request.user.has_perm("plans.change_signingkey")

    def object_action_available(self, obj: SigningKey, action_name: str) -> bool:
        return obj.state != SigningKey.State.REVOKED

    @admin.display(description="state", ordering="state")
    def state_shown(self, key: SigningKey) -> str:
        return format_html(
            '<span class="plangate-badge {}" title="{}">{}</span>',
            key.state,
            key.get_state_display(),
            key.state,
        )

    def changelist_view(self, request, extra_context=None):
        context = {"can_rotate": self.has_manage_permission(request), **(extra_context or {})}
        if context["can_rotate"]:
            context.update(self._rotation_context())
        return super().changelist_view(request, context)

    def _rotation_context(self) -> dict[str, object]:
        """Whether "Rotate now" can work now, and if not, from when; and where the
        emergency door (revoking the active key) is."""
        schedule = keys.rotation_schedule()
        return {
            "schedule": schedule,
            "rotate_possible": schedule.rotate_now_possible(timezone.now()),
            "publication_delay": keys.publication_delay(),
            "active_key_url": reverse(
                "admin:plans_signingkey_change", args=[quote(schedule.active_kid)]
            )
            if schedule.active_kid
            else "",
        }

    def get_urls(self):
        return [
            path(
                "rotate/",
                self.admin_site.admin_view(self.rotate_view),
                name="plans_signingkey_rotate",
            ),
            *super().get_urls(),
        ]

    def _log_key_changes(
        self, request: HttpRequest, changes: Iterable[keys.KeyChange], why: str
    ) -> list[str]:
        """A history entry for every key the service reports it created or moved."""
        lines = []
        for change in changes:
            # The key as the service left it: LogEntry keeps its pk and str(), nothing else.
            key = SigningKey(kid=change.kid, state=change.after)
            if change.before is None:
                self.log_addition(request, key, f"Created as {change.after} by {why}.")
                lines.append(f"{change.kid[:12]}… created ({change.after})")
            else:
                self.log_change(request, key, f"{change.before} → {change.after} by {why}.")
                lines.append(f"{change.kid[:12]}… {change.before} → {change.after}")
        return lines

    def rotate_view(self, request: HttpRequest):
        if not self.has_manage_permission(request):
            raise PermissionDenied
        changelist_url = reverse("admin:plans_signingkey_changelist")
        if request.method == "POST":
            try:
                result = keys.signing_key_rotate(force=True)
            except DomainError as exc:
                self.message_user(request, f"Rotation failed: {exc}", messages.ERROR)
                return HttpResponseRedirect(changelist_url)
            self._log_key_changes(request, result.changes, "“Rotate now”")
            if result.outcome == keys.RotationResult.NEXT_KEY_TOO_YOUNG:
                self.message_user(request, self._too_young_message(), messages.WARNING)
                return HttpResponseRedirect(changelist_url)
            self.message_user(
                request,
                f"Rotation: {result.describe()}.",
                messages.SUCCESS if result.rotated else messages.WARNING,
            )
            return HttpResponseRedirect(changelist_url)
        return TemplateResponse(
            request,
            "admin/plans/signingkey/rotate.html",
            {
                **self.admin_site.each_context(request),
                "title": "Rotate the signing key now",
                "opts": self.opts,
                "changelist_url": changelist_url,
                "keys": SigningKey.objects.exclude(state=SigningKey.State.REVOKED).order_by(
                    "created_at"
                ),
                **self._rotation_context(),
            },
        )

    def _too_young_message(self) -> str:
        signs_from = keys.rotation_schedule().next_key_signs_from
        when = (
            timezone.localtime(signs_from).strftime("%Y-%m-%d %H:%M:%S %Z")
            if signs_from
            else "later"
        )
        return (
            f"Not rotated: the next key is too young to sign. Rotate now becomes possible at "
            f"{when}, once every verifier's cached JWKS lists it. In an emergency, revoke the "
            "active key instead: the next key then signs at once."
        )

    @admin.action(description="Revoke selected signing keys", permissions=["manage"])
    def revoke_signing_keys(self, request: HttpRequest, queryset, next_url: str = ""):
        confirmation = confirm_action(
            self,
            request,
            queryset,
            action="revoke_signing_keys",
            next_url=next_url,
            title="Revoke signing keys",
            question=(
                "Revoke these keys? They leave the JWKS at once, so guards stop accepting "
                "tokens they signed ("
                + running_agents_stop_within(
                    Team.objects.values_list("revocation_bound_seconds", flat=True)
                )
                + ", as token_invalid); a fresh key signs from now on. Those tokens cannot be "
                "refreshed either (a revoked key may be in the wrong hands): their agents "
                "declare new plans."
            ),
            button="Yes, revoke",
            warning=(
                "Keys are shared by every team: tokens of every team signed by these keys stop "
                "verifying. Use this when a key may have leaked."
            ),
        )
        if confirmation is not None:
            return confirmation
        failed = []
        changed: list[keys.KeyChange] = []
        for kid in queryset.exclude(state=SigningKey.State.REVOKED).values_list("kid", flat=True):
            try:
                changed.extend(keys.signing_key_revoke(kid=kid).changes)
            except DomainError as exc:
                failed.append(f"{kid[:12]}…: {exc}")
        changes = self._log_key_changes(request, changed, "“Revoke”")
        if changes:
            self.message_user(request, "Revoked: " + "; ".join(changes) + ".")
        if failed:
            self.message_user(request, "Not revoked: " + "; ".join(failed), messages.ERROR)
        if not changes and not failed:
            self.message_user(request, "The selected keys were already revoked.", messages.INFO)
        return redirect_after_action(request)
