"""The console's "Invite a teammate" page and the page where the invited person chooses a
password. Thin doors into ``members.invite``; the admin site wires their URLs
(controlplane/admin.py)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.contrib.auth.views import PasswordResetConfirmView
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse, reverse_lazy

from audit.actors import acting_as
from audit.doors import person_actor
from kernel.problems import DomainError
from teams.models import Team

from .invite import (
    NAME_MAX_LENGTH,
    USERNAME_MAX_LENGTH,
    ConsoleRole,
    can_invite,
    invitable_teams,
    password_set_record,
    set_password_link_expiry,
    set_password_path,
    teammate_invite,
)


class InviteForm(forms.Form):
    email = forms.EmailField(label="E-mail", max_length=USERNAME_MAX_LENGTH)
    name = forms.CharField(label="Name", max_length=NAME_MAX_LENGTH, required=False)
    console_role = forms.ChoiceField(
        label="Console role", choices=ConsoleRole.choices, widget=forms.RadioSelect
    )
    teams = forms.ModelMultipleChoiceField(
        label="Teams",
        queryset=Team.objects.none(),
        widget=forms.CheckboxSelectMultiple,
        help_text="They see and manage (or, as an auditor, read) these teams' data only.",
    )

    def __init__(self, *args: Any, inviter: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        teams = invitable_teams(inviter).order_by("name")
        field = self.fields["teams"]
        assert isinstance(field, forms.ModelMultipleChoiceField)
        field.queryset = teams
        only = list(teams[:2])
        if len(only) == 1:
            field.initial = [only[0].pk]


def invite_view(request: HttpRequest) -> HttpResponse:
    if not can_invite(request.user):
        raise PermissionDenied
    form = InviteForm(request.POST or None, inviter=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            invitation = teammate_invite(
                email=data["email"],
                name=data["name"],
                console_role=data["console_role"],
                teams=data["teams"],
                invited_by=request.user,
            )
        except DomainError as exc:
            for error in exc.errors or ():
                form.add_error(error.path if error.path in form.fields else None, error.detail)
            if not exc.errors:
                form.add_error(None, exc.detail)
        else:
            link = (
                request.build_absolute_uri(set_password_path(invitation.user))
                if invitation.needs_password
                else ""
            )
            return TemplateResponse(
                request,
                "admin/plangate/invited.html",
                {
                    **admin.site.each_context(request),
                    "title": "Teammate invited",
                    "invitation": invitation,
                    "role_label": invitation.role.label.split(":")[0],
                    "link": link,
                    "link_expires": set_password_link_expiry(),
                },
            )
    return TemplateResponse(
        request,
        "admin/plangate/invite.html",
        {**admin.site.each_context(request), "title": "Invite a teammate", "form": form},
    )


class SetPasswordView(PasswordResetConfirmView):
    """The invited person's one-time link: Django's password-reset confirmation, which
    checks the token and moves it out of the URL before showing the form."""

    template_name = "admin/plangate/set_password.html"
    success_url = reverse_lazy("admin:login")
    extra_context = {"site_header": "Plangate", "site_title": "Plangate admin"}

    def form_valid(self, form: Any) -> HttpResponse:
        user: User = form.user
        # The password and its record together, or neither.
        with acting_as(person_actor(user)), transaction.atomic():
            response = super().form_valid(form)
            password_set_record(user)
        messages.success(self.request, f"Your password is set. Sign in as {user.get_username()}.")
        return response

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["title"] = "Choose your password"
        context["login_url"] = reverse("admin:login")
        return context
