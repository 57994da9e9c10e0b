"""The member and agent admin forms: each saves through its service
(kernel/admin_forms.py says how), so the console keeps the rules the commands keep."""

from __future__ import annotations

from kernel.admin_forms import ServiceModelForm

from .models import Agent, Member
from .services import agent_create, agent_update, member_save


class MemberForm(ServiceModelForm):
    class Meta:
        model = Member
        fields = ["team", "email", "name", "role", "groups", "is_active"]

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
        fields = ["team", "name", "policy", "is_active"]

    def save_through_service(self) -> Agent:
        data = self.cleaned_data
        if self.instance._state.adding:
            return agent_create(
                team=data["team"],
                name=data["name"],
                policy=data["policy"],
                is_active=data["is_active"],
            )
        # The team is read-only once the agent exists.
        return agent_update(
            agent=self.instance,
            name=data["name"],
            policy=data["policy"],
            is_active=data["is_active"],
        )
