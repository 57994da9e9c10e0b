"""The roles and groups that policies name, checked against the ones the team has.

A rule's ``roles`` / ``groups`` are names, not references: a policy may name a role before
it exists, and renaming a role leaves the policies naming its old name (their rules then
match nobody). So nothing here refuses anything. Publishing warns about names the team
does not have (``policy_reference_warnings``, which every door that saves a policy calls);
a role's or group's page lists the active rules that name it, and renaming or deleting one
that is named asks first (``policy_rules_naming``). The rules that can never take effect
(a review rule naming only roles the team lacks, among others) are the guard's findings,
given the team's names here (``policy_rule_findings``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from django.db.models import F

from guard.errors import FieldError
from guard.policy_findings import RuleFinding, policy_findings
from teams.models import Group, Role, Team

from .models import PolicyVersion, active_version_annotations

#: the rule fields that name people's roles and groups
ScopeField = Literal["roles", "groups"]

_SCOPES: tuple[tuple[ScopeField, str], ...] = (("roles", "role"), ("groups", "group"))
_LABEL_LENGTH = 120


@dataclass(frozen=True)
class RuleReference:
    """One rule of a policy's active version that names a role or group."""

    name: str  # the role's or group's name the rule names
    policy_id: int
    policy_slug: str
    version_id: int
    version_number: int
    rule_index: int
    rule_label: str  # the rule's name or description ("" when it has neither)

    @property
    def path(self) -> str:
        return f"rules[{self.rule_index}]"

    def __str__(self) -> str:
        return f"{self.policy_slug} v{self.version_number} ({self.path})"


def _rules(document: object) -> list[Any]:
    rules = document.get("rules") if isinstance(document, Mapping) else None
    return rules if isinstance(rules, list) else []


def _named(rule: object, field: ScopeField) -> list[Any]:
    names = rule.get(field) if isinstance(rule, Mapping) else None
    return names if isinstance(names, list) else []


def policy_reference_warnings(*, team: Team, document: object) -> list[FieldError]:
    """A warning, at its path, for each role or group ``document`` names that ``team`` does
    not have: ``rules[2].roles[0]: role "sre" does not exist in team acme``. Warnings, not
    errors: the rule then matches nobody, which may be meant (the role comes next week).
    Reads the team's names only when some rule names one."""
    rules = _rules(document)
    if not any(_named(rule, field) for rule in rules for field, _ in _SCOPES):
        return []
    known: dict[ScopeField, set[str]] = {
        "roles": set(Role.objects.filter(team=team).values_list("name", flat=True)),
        "groups": set(Group.objects.filter(team=team).values_list("name", flat=True)),
    }
    warnings: list[FieldError] = []
    for index, rule in enumerate(rules):
        for field, what in _SCOPES:
            for position, name in enumerate(_named(rule, field)):
                if not isinstance(name, str) or name in known[field]:
                    continue
                detail = f'{what} "{name}" does not exist in team {team.slug}'
                # Names match exactly; a near miss in case is the likely mistake.
                alike = sorted(_case_variants(name, known[field]))
                if alike:
                    detail += f' (did you mean "{alike[0]}"?)'
                warnings.append(FieldError(f"rules[{index}].{field}[{position}]", detail))
    return warnings


def policy_rule_findings(*, team: Team, document: dict[str, Any]) -> list[RuleFinding]:
    """The allow and review rules of a validated ``document`` that never take effect in
    ``team`` (guard.policy_findings), judged with the team's role and group names, which
    are read only when a review rule names some."""
    rules = _rules(document)
    named = any(
        rule.get("effect") == "review" and _named(rule, field)
        for rule in rules
        for field, _ in _SCOPES
    )
    if not named:
        return policy_findings(document)
    return policy_findings(
        document,
        roles=set(Role.objects.filter(team=team).values_list("name", flat=True)),
        groups=set(Group.objects.filter(team=team).values_list("name", flat=True)),
    )


def _case_variants(name: str, names: set[str]) -> set[str]:
    folded = name.casefold()
    return {other for other in names if other.casefold() == folded}


def _label(rule: Mapping[str, Any]) -> str:
    text = " ".join(str(rule.get("name") or rule.get("description") or "").split())
    return text if len(text) <= _LABEL_LENGTH else text[: _LABEL_LENGTH - 1] + "…"


def policy_rules_naming(
    *, team: Team | int, field: ScopeField, names: Collection[str]
) -> list[RuleReference]:
    """The rules of the team's active policy versions (what admits plans now) whose
    ``field`` names one of ``names``, by policy slug and rule index. One query."""
    wanted = set(names)
    if not wanted:
        return []
    team_id = team.pk if isinstance(team, Team) else team
    versions = (
        PolicyVersion.objects.filter(policy__team_id=team_id)
        .annotate(**active_version_annotations("policy_id"))
        .filter(pk=F("active_version_id"))
        .select_related("policy")
        .order_by("policy__slug")
    )
    references = []
    for version in versions:
        for index, rule in enumerate(_rules(version.document)):
            for name in _named(rule, field):
                if name in wanted:
                    references.append(
                        RuleReference(
                            name=name,
                            policy_id=version.policy_id,
                            policy_slug=version.policy.slug,
                            version_id=version.pk,
                            version_number=version.number,
                            rule_index=index,
                            rule_label=_label(rule),
                        )
                    )
    return references
