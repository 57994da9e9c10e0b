"""Live plans issued through the real issuance service, and a stricter document to preview."""

from __future__ import annotations

import copy

from plans.models import Plan
from plans.services import plan_issue
from tests.conftest import POLICY, AgentPersona, plan_document

MAIL_PLAN_STEPS = [
    {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}},
    {"tool": "send_email", "args": {"to": {"eq": "team@acme.dev"}}},
]


def no_mail() -> dict:
    """POLICY with e-mail forbidden: its rule is rules[4]."""
    document = copy.deepcopy(POLICY)
    document["rules"].append({"effect": "deny", "tools": ["send_email"], "name": "no mail"})
    return document


def issue(persona: AgentPersona, **overrides) -> Plan:
    return plan_issue(agent=persona.agent, document=plan_document(**overrides)).plan


def mail_plan(persona: AgentPersona, user: str = "alice@acme.dev") -> Plan:
    return issue(persona, user=user, goal="Mail the summary", steps=MAIL_PLAN_STEPS)
