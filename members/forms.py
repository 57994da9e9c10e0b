"""The member and agent admin forms: each saves through its service
(kernel/admin_forms.py says how), so the console keeps the rules the commands keep."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils.html import format_html

from kernel.admin_forms import ServiceModelForm

from .models import Agent, Member
from .services import (
    agent_create,
    agent_update,
    member_email_owner,
    member_email_taken_message,
    member_save,
)


class MemberForm(ServiceModelForm):
    class Meta:
        model = Member
        fields = ["team", "email", "name", "role", "groups", "is_active"]

    def clean(self) -> dict[str, Any] | None:
        data = super().clean() or {}
        team, email = data.get("team"), data.get("email")
        if team is not None and email:
            # Said here, with a link to the member, before the (team, e-mail) constraint
            # would be named instead; the field's error also keeps the constraint unchecked.
            owner = member_email_owner(team=team, email=email, member=self.instance)
            if owner is not None:
                self.add_error(
                    "email",
                    format_html(
                        '{} <a href="{}">Open {}</a>.',
                        member_email_taken_message(email, team),
                        reverse("admin:members_member_change", args=[owner.pk]),
                        owner.email,
                    ),
                )
        return data

    def save_through_service(self) -> Member:
        data = self.cleaned_data
        return member_save(
            member=None if self.instance._state.adding else self.instance,
            team=data["team"],
            email=data["email"],
            name=data["name"],
            role=data["role"] or "",
            groups=list(data["groups"]),
            is_active=data["is_active"],
        )


class AgentForm(ServiceModelForm):
    class Meta:
        model = Agent
        fields = ["team", "name", "policy", "is_active", "accepts_delegations"]

    def save_through_service(self) -> Agent:
        data = self.cleaned_data
        if self.instance._state.adding:
            return agent_create(
                team=data["team"],
                name=data["name"],
                policy=data["policy"],
                is_active=data["is_active"],
                accepts_delegations=data["accepts_delegations"],
            )
        # The team is read-only once the agent exists.
        return agent_update(
            agent=self.instance,
            name=data["name"],
            policy=data["policy"],
            is_active=data["is_active"],
            accepts_delegations=data["accepts_delegations"],
        )
