"""The decision log, the plans and their tokens, as the console's pages read them, held to
the audit trail (docs/decisions/0079): a check ``verify_audit`` and the console's "Verify
chain" run through audit.verification.TABLE_CHECKS.

The chain proves the records were not changed; this proves the tables agree with them.
Each row was written in one transaction with its record (plans.event_intake: a
``decision`` record per PlanEvent; plans.records: ``plan_issued`` with a plan's first
token, ``token_refreshed`` with each other), so both sides are compared as multisets of
the fields they share:

* a decision: plan, time, tool, code, step, reason, rule, arguments' digest, policy version;
* a plan with tokens (or one no person had to approve): its ``plan_issued`` record's hash,
  goal, step count, agent and policy version;
* a token: plan, kid, iat and exp (seconds);
* a revoked plan: its ``plan_revoked`` record's time, actor and reason.

A row with no matching record was changed or inserted; a record with no matching row, its
row changed or deleted. Rows that retention removed have emptied records, which are left
out. A decision written while the check reads could look unmatched: a disagreement is
named only if it is still there when read again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from audit.models import AuditRecord
from audit.verification import TablesReport
from teams.models import Team

from .models import Plan, PlanEvent, PlanToken

Key = tuple[Any, ...]


def _instant(value: Any) -> str:
    return value.isoformat(timespec="microseconds") if value is not None else ""


def _decision_rows(team: Team) -> dict[Key, list[str]]:
    found: dict[Key, list[str]] = {}
    rows = PlanEvent.objects.filter(plan__team=team).values_list(
        "pk",
        "plan_id",
        "occurred_at",
        "tool",
        "decision",
        "step",
        "reason",
        "rule_index",
        "rule_description",
        "args_digest",
        "decided_under__number",
    )
    for (
        pk,
        plan_id,
        at,
        tool,
        code,
        step,
        reason,
        index,
        description,
        digest,
        number,
    ) in rows.iterator(2000):
        rule = (index, description) if description else None
        key = (plan_id, _instant(at), tool, code, step, reason, rule, digest, number)
        found.setdefault(key, []).append(f"decision row id {pk} of plan {plan_id}")
    return found


def _comparable(value: Any) -> Any:
    """A record's value as a key part: a list or an object (a record written by hand, or
    damaged) as its JSON text, which no row's value equals, so it shows as a mismatch
    instead of failing the check."""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return value


def _decision_records(team: Team) -> dict[Key, list[str]]:
    found: dict[Key, list[str]] = {}
    records = (
        AuditRecord.objects.whole()
        .filter(team=team, kind=AuditRecord.Kind.DECISION)
        .values_list("seq", "pk", "plan_id", "at", "code", "rule", "details", "policy_version")
    )
    for seq, pk, plan_id, at, code, rule, details, number in records.iterator(2000):
        details = details if isinstance(details, dict) else {}
        rule_key = (rule.get("index"), rule.get("description")) if isinstance(rule, dict) else None
        key = (
            plan_id,
            _instant(at),
            _comparable(details.get("tool")),
            code,
            _comparable(details.get("step")),
            _comparable(details.get("reason", "")),
            tuple(_comparable(part) for part in rule_key) if rule_key else None,
            _comparable(details.get("argsDigest", "")),
            number,
        )
        where = f"seq {seq}" if seq is not None else f"id {pk} (not sealed yet)"
        found.setdefault(key, []).append(f"decision record {where} of plan {plan_id}")
    return found


def _plan_rows(team: Team) -> dict[Key, list[str]]:
    found: dict[Key, list[str]] = {}
    with_tokens = set(PlanToken.objects.filter(plan__team=team).values_list("plan_id", flat=True))
    rows = Plan.objects.filter(team=team).values_list(
        "pk",
        "hash",
        "goal",
        "document",
        "agent_id",
        "policy_version__policy__slug",
        "policy_version__number",
        "approval",
    )
    for pk, digest, goal, document, agent_id, slug, number, approval in rows.iterator(2000):
        if pk not in with_tokens and approval:
            continue  # awaits (or was refused) a person's approval: no token, no record yet
        steps = len(document.get("steps", ())) if isinstance(document, dict) else None
        key = (pk, digest, goal, steps, agent_id, slug, number)
        found.setdefault(key, []).append(f"plan row {pk}")
    return found


def _plan_records(team: Team) -> dict[Key, list[str]]:
    found: dict[Key, list[str]] = {}
    records = AuditRecord.objects.filter(team=team, kind=AuditRecord.Kind.PLAN_ISSUED).values_list(
        "seq", "pk", "plan_id", "plan_hash", "details", "agent_id", "policy", "policy_version"
    )
    for seq, pk, plan_id, digest, details, agent_id, slug, number in records.iterator(2000):
        details = details if isinstance(details, dict) else {}
        key = (plan_id, digest, details.get("goal"), details.get("steps"), agent_id, slug, number)
        where = f"seq {seq}" if seq is not None else f"id {pk} (not sealed yet)"
        found.setdefault(key, []).append(f"plan_issued record {where} of plan {plan_id}")
    return found


def _token_rows(team: Team) -> dict[Key, list[str]]:
    found: dict[Key, list[str]] = {}
    rows = PlanToken.objects.filter(plan__team=team).values_list(
        "pk", "plan_id", "kid", "issued_at", "expires_at"
    )
    for pk, plan_id, kid, issued_at, expires_at in rows.iterator(2000):
        key = (plan_id, kid, int(issued_at.timestamp()), int(expires_at.timestamp()))
        found.setdefault(key, []).append(f"token row id {pk} of plan {plan_id}")
    return found


def _token_records(team: Team) -> dict[Key, list[str]]:
    found: dict[Key, list[str]] = {}
    records = AuditRecord.objects.filter(
        team=team, kind__in=(AuditRecord.Kind.PLAN_ISSUED, AuditRecord.Kind.TOKEN_REFRESHED)
    ).values_list("seq", "pk", "kind", "plan_id", "details")
    for seq, pk, kind, plan_id, details in records.iterator(2000):
        details = details if isinstance(details, dict) else {}
        key = (plan_id, details.get("kid"), details.get("iat"), details.get("exp"))
        where = f"seq {seq}" if seq is not None else f"id {pk} (not sealed yet)"
        found.setdefault(key, []).append(f"{kind} record {where} of plan {plan_id}")
    return found


def _revocation_rows(team: Team) -> dict[Key, list[str]]:
    found: dict[Key, list[str]] = {}
    rows = Plan.objects.filter(team=team, status=Plan.Status.REVOKED).values_list(
        "pk", "revoked_at", "revoked_by", "revoke_reason"
    )
    for pk, at, by, reason in rows.iterator(2000):
        found.setdefault((pk, _instant(at), by, reason), []).append(f"revoked plan row {pk}")
    return found


def _revocation_records(team: Team) -> dict[Key, list[str]]:
    found: dict[Key, list[str]] = {}
    records = AuditRecord.objects.filter(team=team, kind=AuditRecord.Kind.PLAN_REVOKED).values_list(
        "seq", "pk", "plan_id", "at", "actor", "details"
    )
    for seq, pk, plan_id, at, actor, details in records.iterator(2000):
        details = details if isinstance(details, dict) else {}
        key = (plan_id, _instant(at), actor, details.get("reason", ""))
        where = f"seq {seq}" if seq is not None else f"id {pk} (not sealed yet)"
        found.setdefault(key, []).append(f"plan_revoked record {where} of plan {plan_id}")
    return found


_TABLES = (
    ("decisions", _decision_rows, _decision_records),
    ("plans", _plan_rows, _plan_records),
    ("tokens", _token_rows, _token_records),
    ("revocations", _revocation_rows, _revocation_records),
)


def _unmatched(rows: dict[Key, list[str]], records: dict[Key, list[str]]) -> Iterable[str]:
    for key in rows.keys() | records.keys():
        have, want = rows.get(key, []), records.get(key, [])
        for name in have[len(want) :]:
            yield f"{name} matches no record: it was changed or inserted"
        for name in want[len(have) :]:
            yield f"{name} matches no row: its row was changed or deleted"


def _of_plans(found: dict[Key, list[str]], plans: set[str]) -> dict[Key, list[str]]:
    return {key: names for key, names in found.items() if key[0] in plans}


def _compare(team: Team) -> tuple[dict[str, int], list[str]]:
    checked: dict[str, int] = {}
    problems: list[str] = []
    # Decisions and tokens of the plans that exist: a deleted plan is named by its
    # plan_issued record, with no row (the decisions and tokens go with it).
    plans = set(Plan.objects.filter(team=team).values_list("pk", flat=True))
    for name, read_rows, read_records in _TABLES:
        rows = read_rows(team)
        records = read_records(team)
        if name != "plans":
            records = _of_plans(records, plans)
        checked[name] = sum(len(names) for names in rows.values())
        problems += sorted(_unmatched(rows, records))
    return checked, problems


def plan_tables_verify(team: Team) -> TablesReport:
    """The decision log, plans and tokens of ``team`` against its trail (TABLE_CHECKS)."""
    checked, problems = _compare(team)
    if problems:  # read again: a decision committed while this read is not a tamper
        checked, again = _compare(team)
        problems = [problem for problem in problems if problem in set(again)]
    return TablesReport(checked, problems)
