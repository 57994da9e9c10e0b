"""Rollback: "Publish this version again" on an old policy version, the object action of
the version's page. It publishes the old document as the next version through
``policy_version_republish`` (validated, numbered and recorded like any publication), after
a confirmation page that shows what an edit's preview shows (``admin_preview``'s
``impact_context`` and its template include): the live plans the document would refuse and
why, the rules that could never take effect, and the diff from the active version.

"Promote" on the version tried in shadow is the same flow with the shadow's document
(``policy_shadow_promote``, which also stops trying it in shadow); "Withdraw" stops trying it
(``policy_shadow_withdraw``). The policy page's shadow section links to both."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from kernel.admin_actions import action_form, confirm_action, redirect_after_action
from kernel.problems import DomainError
from policies.models import PolicyVersion
from policies.references import policy_reference_warnings
from policies.selectors import policy_active_version, policy_next_version_number
from policies.services import (
    policy_shadow_promote,
    policy_shadow_withdraw,
    policy_version_republish,
)

from .admin_preview import impact_context
from .impact import policy_impact


class RepublishForm(forms.Form):
    comment = forms.CharField(
        max_length=400,
        required=False,
        help_text='Optional: why. The version\'s comment reads "Republished version N: …".',
        widget=forms.TextInput(attrs={"size": 80}),
    )


class PromoteForm(forms.Form):
    # The active version the page showed the change from: a version published since is
    # not silently published over (the service's "published meanwhile" check).
    base_version = forms.IntegerField(required=False, widget=forms.HiddenInput, label="")


#: the actions on the version tried in shadow
SHADOW_ACTIONS = ("promote_shadow", "withdraw_shadow")


class RepublishActionMixin(admin.ModelAdmin):
    """For the PolicyVersion admin, listed before its base: the actions, who may run them
    (those who may change policies; never an auditor) and on which versions: publishing
    again, not the active one (already the newest) nor the shadow (promote it instead);
    promoting and withdrawing, only the version tried in shadow now."""

    def has_publish_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.has_perm("policies.change_policy")

    def object_action_available(self, obj: PolicyVersion, action_name: str) -> bool:
        if action_name in SHADOW_ACTIONS:
            return obj.policy.shadow_version_id == obj.pk
        if action_name != "publish_again":
            return True
        if obj.policy.shadow_version_id == obj.pk:
            return False
        active = policy_active_version(policy=obj.policy_id)
        return active is not None and active.pk != obj.pk

    def _the_shadow(
        self, request: HttpRequest, queryset: QuerySet[PolicyVersion]
    ) -> PolicyVersion | None:
        """The one selected version, when it is tried in shadow now; else None, said."""
        versions = list(queryset.select_related("policy", "policy__team")[:2])
        if len(versions) != 1:
            self.message_user(request, "Choose one shadow version.", messages.ERROR)
            return None
        version = versions[0]
        if version.policy.shadow_version_id != version.pk:
            self.message_user(
                request,
                f"{version} is not tried in shadow now: nothing was changed.",
                messages.ERROR,
            )
            return None
        return version

    @admin.action(description="Promote the selected shadow version", permissions=["publish"])
    def promote_shadow(
        self, request: HttpRequest, queryset: QuerySet[PolicyVersion], next_url: str = ""
    ) -> HttpResponse | None:
        version = self._the_shadow(request, queryset)
        if version is None:
            return redirect_after_action(request)
        policy = version.policy
        current = policy_active_version(policy=policy)
        form = action_form(request, PromoteForm)
        if not form.is_bound:
            form.fields["base_version"].initial = current.number if current else None
        confirmation = confirm_action(
            self,
            request,
            queryset,
            action="promote_shadow",
            next_url=next_url,
            title=f"Promote {policy.slug} shadow version {version.number}",
            question=(
                f"Publish the document of shadow version {version.number} as version "
                f"{policy_next_version_number(policy=policy)}, the active version of "
                f"{policy.slug}, and stop trying it in shadow? Agents using it get it with "
                "their next plan or refresh."
            ),
            button="Promote",
            form=form,
            template="admin/policies/policyversion/confirm_republish.html",
            extra_context=lambda: _impact_details(version, current),
        )
        if confirmation is not None:
            return confirmation
        try:
            published = policy_shadow_promote(
                policy=policy,
                created_by=request.user.get_username(),
                expected_base=form.cleaned_data["base_version"],
                expected_shadow=version.number,
            )
        except DomainError as exc:
            details = "; ".join(f"{error.path}: {error.detail}" for error in exc.errors)
            self.message_user(request, f"{exc.detail} {details}".strip(), messages.ERROR)
            return redirect_after_action(request)
        if current is not None and published.pk == current.pk:
            self.message_user(
                request,
                f"Shadow version {version.number}'s document is already the active one "
                f"(version {current.number}): nothing was published, and no version is "
                "tried in shadow now.",
                messages.WARNING,
            )
            return redirect_after_action(request)
        self.log_change(
            request, policy, f"Published version {published.number}: {published.comment}."
        )
        self.message_user(
            request,
            f"Published {policy.slug} version {published.number} from shadow version "
            f"{version.number}; no version is tried in shadow now. Agents using it get it "
            "with their next plan or refresh.",
        )
        return HttpResponseRedirect(
            reverse("admin:policies_policyversion_change", args=[published.pk])
        )

    @admin.action(description="Withdraw the selected shadow version", permissions=["publish"])
    def withdraw_shadow(
        self, request: HttpRequest, queryset: QuerySet[PolicyVersion], next_url: str = ""
    ) -> HttpResponse | None:
        version = self._the_shadow(request, queryset)
        if version is None:
            return redirect_after_action(request)
        policy = version.policy
        current = policy_active_version(policy=policy)
        confirmation = confirm_action(
            self,
            request,
            queryset,
            action="withdraw_shadow",
            next_url=next_url,
            title=f"Withdraw {policy.slug} shadow version {version.number}",
            question=(
                f"Stop trying version {version.number} in shadow? "
                + (f"Version {current.number} stays active; " if current else "")
                + "the differences it recorded stay listed."
            ),
            button="Withdraw",
        )
        if confirmation is not None:
            return confirmation
        try:
            policy_shadow_withdraw(policy=policy, by=request.user.get_username())
        except DomainError as exc:
            details = "; ".join(f"{error.path}: {error.detail}" for error in exc.errors)
            self.message_user(request, f"{exc.detail} {details}".strip(), messages.ERROR)
            return redirect_after_action(request)
        self.log_change(request, policy, f"Withdrew shadow version {version.number}.")
        self.message_user(
            request,
            f"Withdrew {policy.slug} shadow version {version.number}; no version is tried in "
            "shadow now.",
        )
        return redirect_after_action(request) or HttpResponseRedirect(
            reverse("admin:policies_policy_change", args=[policy.pk])
        )

    @admin.action(description="Publish the selected version again", permissions=["publish"])
    def publish_again(
        self, request: HttpRequest, queryset: QuerySet[PolicyVersion], next_url: str = ""
    ) -> HttpResponse | None:
        versions = list(queryset.select_related("policy", "policy__team")[:2])
        if len(versions) != 1:
            self.message_user(request, "Choose one version to publish again.", messages.ERROR)
            return None
        version = versions[0]
        policy = version.policy
        current = policy_active_version(policy=policy)
        form = action_form(request, RepublishForm)
        confirmation = confirm_action(
            self,
            request,
            queryset,
            action="publish_again",
            next_url=next_url,
            title=f"Publish {policy.slug} version {version.number} again",
            question=(
                f"Publish the document of version {version.number} as the newest version of "
                f"{policy.slug}"
                + f" (version {policy_next_version_number(policy=policy)})"
                + "? Agents using it get it with their next plan or refresh."
            ),
            button="Publish again",
            form=form,
            template="admin/policies/policyversion/confirm_republish.html",
            extra_context=lambda: _impact_details(version, current),
        )
        if confirmation is not None:
            return confirmation
        try:
            published = policy_version_republish(
                version=version,
                comment=form.cleaned_data["comment"],
                created_by=request.user.get_username(),
            )
        except DomainError as exc:
            details = "; ".join(f"{error.path}: {error.detail}" for error in exc.errors)
            self.message_user(request, f"{exc.detail} {details}".strip(), messages.ERROR)
            return redirect_after_action(request)
        if current is not None and published.pk == current.pk:
            self.message_user(
                request,
                f"Version {version.number}'s document is already the active one "
                f"(version {current.number}): nothing was published.",
                messages.WARNING,
            )
            return redirect_after_action(request)
        self.log_change(
            request, policy, f"Published version {published.number}: {published.comment}."
        )
        self.message_user(
            request,
            f"Published {policy.slug} version {published.number} with the document of version "
            f"{version.number}. Agents using it get it with their next plan or refresh.",
        )
        # An old document may name a role or group renamed or deleted since.
        for warning in policy_reference_warnings(team=policy.team, document=published.document):
            self.message_user(
                request,
                f"{warning}: the rule matches no member until the team has it.",
                messages.WARNING,
            )
        return HttpResponseRedirect(
            reverse("admin:policies_policyversion_change", args=[published.pk])
        )


def _impact_details(version: PolicyVersion, current: PolicyVersion | None) -> dict[str, Any]:
    """What the confirmation shows: the edit preview's account of publishing the old
    document over the active version (the same computation, the same template part)."""
    policy = version.policy
    try:
        impact = policy_impact(policy=policy, document=version.document)
    except DomainError:
        return {"warning": "This document is no longer valid: publishing it will be refused."}
    number = policy_next_version_number(policy=policy)
    return impact_context(
        impact,
        active=current,
        new_label=f"{policy.slug} v{number} (the document of v{version.number})",
    )
