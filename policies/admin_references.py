"""The role and group pages show the policy rules that name them, and ask before a rename
or a deletion that would leave those rules matching nobody.

A policy names roles and groups by name (``policies.references``): renaming role ``sre``
turns every rule naming ``sre`` into one that admits no member, so a working deploy plan
would answer ``policy_denied`` at its next refresh. The change form therefore holds such a
rename on a confirmation page ("Rename anyway" / "Cancel"); Django's delete confirmation
lists the same rules.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import quote, unquote
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from members.admin import MembersShownAdmin
from teams.models import Group, Role

from .references import RuleReference, ScopeField, policy_rules_naming

#: the POST key the confirmation page adds: the admin confirmed the rename
RENAME_CONFIRMED = "_rename_confirmed"


def references_table(references: list[RuleReference], *, empty: str) -> SafeString:
    """The rules as a table: policy, version (linked to the rule's anchor on the version
    page), rule path and its name or description."""
    if not references:
        return format_html('<p class="plangate-note">{}</p>', empty)
    rows = format_html_join(
        "",
        '<tr><td><a href="{}">{}</a></td><td><a href="{}#rules-{}">v{}</a></td>'
        '<td><a href="{}#rules-{}"><code>{}</code></a></td><td>{}</td><td>{}</td></tr>',
        (
            (
                reverse("admin:policies_policy_change", args=[quote(ref.policy_id)]),
                ref.policy_slug,
                reverse("admin:policies_policyversion_change", args=[quote(ref.version_id)]),
                ref.rule_index,
                ref.version_number,
                reverse("admin:policies_policyversion_change", args=[quote(ref.version_id)]),
                ref.rule_index,
                ref.path,
                ref.rule_label or "—",
                ref.name,
            )
            for ref in references
        ),
    )
    return format_html(
        '<table class="plangate-table plangate-policy-references"><thead><tr><th>policy</th>'
        "<th>active version</th><th>rule</th><th>name or description</th><th>names</th>"
        "</tr></thead><tbody>{}</tbody></table>",
        rows,
    )


class NameInTeamForm(forms.ModelForm):
    """A role's or group's form: on its page the team is read-only, so Django's unique
    check of (team, name) would leave the pair out and a taken name would reach the
    database's constraint; the name is checked within the row's team here instead."""

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        instance = self.instance
        if instance.pk is not None:
            taken = (
                type(instance)
                ._default_manager.filter(team_id=instance.team_id, name=name)
                .exclude(pk=instance.pk)
            )
            if taken.exists():
                raise forms.ValidationError(
                    f"The team already has a {instance._meta.verbose_name} named “{name}”."
                )
        return name


class PolicyReferencesAdmin(admin.ModelAdmin):
    """For the Role and Group admins (listed before their base): the ``policy_rules`` field
    on the object's page, the rename confirmation and the list on the delete pages."""

    #: which rule field names this model's rows
    reference_field: ScopeField
    #: what it is called in sentences ("role", "group")
    reference_noun: str
    #: what members lose, in a sentence about them ("with this role", "in this group")
    members_phrase: str

    form = NameInTeamForm
    delete_confirmation_template = "admin/members/policy_references_delete_confirmation.html"
    delete_selected_confirmation_template = (
        "admin/members/policy_references_delete_selected_confirmation.html"
    )

    def references_to(self, objects: list[Any]) -> list[RuleReference]:
        """The active rules naming any of ``objects`` (each looked up in its own team)."""
        references: list[RuleReference] = []
        names_by_team: dict[int, list[str]] = {}
        for obj in objects:
            names_by_team.setdefault(obj.team_id, []).append(obj.name)
        for team_id, names in sorted(names_by_team.items()):
            references += policy_rules_naming(team=team_id, field=self.reference_field, names=names)
        return references

    # --- the object's page ----------------------------------------------------------------

    def get_fields(self, request: HttpRequest, obj: Any = None):
        fields = list(super().get_fields(request, obj))
        return [*fields, "policy_rules"] if obj is not None else fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None):
        return [*super().get_readonly_fields(request, obj), "policy_rules"]

    @admin.display(description="used by policies")
    def policy_rules(self, obj: Any) -> SafeString:
        return references_table(
            self.references_to([obj]),
            empty=f"No active policy version names {self.reference_noun} “{obj.name}”.",
        )

    # --- rename -------------------------------------------------------------------------------

    def changeform_view(
        self, request: HttpRequest, object_id=None, form_url: str = "", extra_context=None
    ) -> HttpResponse:
        if (
            request.method == "POST"
            and object_id is not None
            and RENAME_CONFIRMED not in request.POST
        ):
            held = self._rename_held_for_confirmation(request, object_id)
            if held is not None:
                return held
        return super().changeform_view(request, object_id, form_url, extra_context)

    def _rename_held_for_confirmation(
        self, request: HttpRequest, object_id: str
    ) -> HttpResponse | None:
        """The confirmation page, when the posted form is valid and renames a role or group
        that an active policy version names; None lets the admin go on as usual (it also
        answers a missing object, a refused permission or an invalid form)."""
        obj = self.get_object(request, unquote(object_id))
        if obj is None or not self.has_change_permission(request, obj):
            return None
        old_name = obj.name
        form = self.get_form(request, obj, change=True)(request.POST, request.FILES, instance=obj)
        valid = form.is_valid()
        obj.name = old_name  # the form wrote the new name on the instance; nothing is saved
        if not valid or form.cleaned_data.get("name", old_name) == old_name:
            return None
        references = self.references_to([obj])
        if not references:
            return None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "object": obj,
            "title": f"Rename {self.reference_noun} “{old_name}” to “{form.cleaned_data['name']}”?",
            "old_name": old_name,
            "new_name": form.cleaned_data["name"],
            "noun": self.reference_noun,
            "members_phrase": self.members_phrase,
            "member_total": obj.members.count(),
            "references": references,
            "references_table": references_table(references, empty=""),
            "policies_named": ", ".join(f"{ref.policy_slug} ({ref.path})" for ref in references),
            "posted": [
                (key, value)
                for key, values in request.POST.lists()
                if key != "csrfmiddlewaretoken"
                for value in values
            ],
            "confirmed_key": RENAME_CONFIRMED,
            "change_url": reverse(
                f"admin:{self.opts.app_label}_{self.opts.model_name}_change",
                args=[quote(obj.pk)],
            ),
        }
        return TemplateResponse(
            request, "admin/members/policy_references_rename_confirmation.html", context
        )

    # --- delete ------------------------------------------------------------------------------

    def delete_view(self, request: HttpRequest, object_id: str, extra_context=None):
        obj = self.get_object(request, unquote(object_id))
        context = dict(extra_context or {})
        if obj is not None and request.method != "POST":
            context.update(self._deletion_context([obj]))
        return super().delete_view(request, object_id, context)

    def _deletion_context(self, objects: list[Model]) -> dict[str, Any]:
        references = self.references_to(objects)
        return {
            "policy_references": references,
            "policy_references_table": references_table(references, empty=""),
            "reference_noun": self.reference_noun,
            "members_phrase": self.members_phrase,
        }

    def get_actions(self, request: HttpRequest):
        actions = super().get_actions(request)
        entry = actions.get("delete_selected")
        if entry is not None:
            delete_selected, name, description = entry

            def delete_selected_listing_rules(
                modeladmin: PolicyReferencesAdmin, request: HttpRequest, queryset: QuerySet
            ):
                response = delete_selected(modeladmin, request, queryset)
                # The confirmation page (not yet rendered): add the rules to it.
                if isinstance(response, TemplateResponse) and response.context_data is not None:
                    response.context_data.update(modeladmin._deletion_context(list(queryset)))
                return response

            delete_selected_listing_rules.allowed_permissions = getattr(  # type: ignore[attr-defined]
                delete_selected, "allowed_permissions", ("delete",)
            )
            actions["delete_selected"] = (delete_selected_listing_rules, name, description)
        return actions


@admin.register(Role)
class RoleAdmin(PolicyReferencesAdmin, MembersShownAdmin):
    member_filter = "role__id__exact"
    reference_field = "roles"
    reference_noun = "role"
    members_phrase = "with this role"


@admin.register(Group)
class GroupAdmin(PolicyReferencesAdmin, MembersShownAdmin):
    member_filter = "groups__id__exact"
    reference_field = "groups"
    reference_noun = "group"
    members_phrase = "in this group"
