"""The audit trail as OCSF events, for a SIEM: one function per record kind, here only.

Each sealed record (``audit.models.AuditRecord``) becomes one event of the Open
Cybersecurity Schema Framework, version ``OCSF_VERSION`` (the newest the maintained schema
package ships; docs/decisions/0078):

* what an agent asked through the API (declarations, refreshes, guard decisions, the plan's
  end, delegations) is **API Activity** (class 6003) with the ``security_control`` profile:
  ``action_id``/``disposition_id`` say allowed or blocked, ``policy`` and
  ``actor.authorizations`` name the policy version and the decision;
* a member's account changed in the console is **Account Change** (3001);
* every other console or operator change, a revocation and the approval queue's steps are
  **Entity Management** (3004), the entity being the plan, the approval or the changed
  object.

OCSF 1.8 has no ``ai_agent`` object: the agent is the actor's application (``actor.app_uid``
and ``actor.app_name``), the member it acts for the actor's user; what OCSF has no field for
is kept under ``unmapped`` (the plan hash, the rule, the record's own details). Every event
carries the record's place in the chain (``metadata.sequence``, ``metadata.uid`` =
``<team>:<seq>``, the record's hash in ``unmapped.plangate.hash``), so a SIEM holding the
events can still check the chain against the records API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .models import AuditRecord

OCSF_VERSION = "1.8.0"

# Classes, categories and enumerations of OCSF 1.8.0, by the names the schema gives them.
API_ACTIVITY, APPLICATION_ACTIVITY = 6003, 6
ACCOUNT_CHANGE, ENTITY_MANAGEMENT, IAM = 3001, 3004, 3
_CLASS_NAMES = {
    API_ACTIVITY: ("API Activity", "Application Activity"),
    ACCOUNT_CHANGE: ("Account Change", "Identity & Access Management"),
    ENTITY_MANAGEMENT: ("Entity Management", "Identity & Access Management"),
}
CREATE, READ, UPDATE, DELETE, OTHER = 1, 2, 3, 4, 99
# Entity Management's own activities beyond create/read/update/delete
ENABLE, DISABLE, DEACTIVATE = 8, 9, 11
# Account Change's activities
ACCOUNT_CREATE, ACCOUNT_ENABLE, ACCOUNT_PASSWORD_CHANGE, ACCOUNT_DISABLE, ACCOUNT_DELETE = (
    1,
    2,
    3,
    5,
    6,
)
SUCCESS, FAILURE = 1, 2
INFORMATIONAL, LOW, MEDIUM = 1, 2, 3
ALLOWED, DENIED = 1, 2  # action_id
DISPOSITION_ALLOWED, DISPOSITION_BLOCKED = 1, 2

_ENTITY_ACTIVITIES = {
    "created": CREATE,
    "invited": CREATE,
    "updated": UPDATE,
    "published": UPDATE,
    "password set": UPDATE,
    "deleted": DELETE,
    "removed": DELETE,
    "enabled": ENABLE,
    "disabled": DISABLE,
    "revoked": DEACTIVATE,
}
_ACCOUNT_ACTIVITIES = {
    "created": ACCOUNT_CREATE,
    "invited": ACCOUNT_CREATE,
    "enabled": ACCOUNT_ENABLE,
    "password set": ACCOUNT_PASSWORD_CHANGE,
    "disabled": ACCOUNT_DISABLE,
    "deleted": ACCOUNT_DELETE,
    "removed": ACCOUNT_DELETE,
}
#: the change records' objects that are people's accounts (Account Change)
_ACCOUNT_OBJECTS = frozenset({"member", "user", "console user"})

Event = dict[str, Any]


def ocsf_event(record: AuditRecord, team_slug: str) -> Event:
    """The OCSF event of a record (a redacted one keeps only its place in the chain)."""
    return MAPPINGS[AuditRecord.Kind(record.kind)](record, team_slug)


# --- what every event shares -----------------------------------------------------------


def _base(
    record: AuditRecord,
    team_slug: str,
    *,
    class_uid: int,
    activity_id: int,
    activity_name: str,
    success: bool | None,
    severity_id: int = INFORMATIONAL,
    profiles: tuple[str, ...] = (),
) -> Event:
    class_name, category_name = _CLASS_NAMES[class_uid]
    event: Event = {
        "class_uid": class_uid,
        "class_name": class_name,
        "category_uid": class_uid // 1000,
        "category_name": category_name,
        "activity_id": activity_id,
        "activity_name": activity_name,
        "type_uid": class_uid * 100 + activity_id,
        "type_name": f"{class_name}: {activity_name}",
        "time": int(record.at.timestamp() * 1000),
        "severity_id": severity_id,
        "severity": {INFORMATIONAL: "Informational", LOW: "Low", MEDIUM: "Medium"}[severity_id],
        "metadata": {
            "version": OCSF_VERSION,
            "product": {"name": "Plangate", "vendor_name": "Plangate", "uid": "plangate"},
            # A record not sealed yet (the console's export may list one) has no seq.
            "uid": f"{team_slug}:{record.seq}" if record.seq else f"{team_slug}:id{record.pk}",
            "tenant_uid": team_slug,
            "log_name": "audit",
            "event_code": record.kind,
            "profiles": list(profiles),
        },
        "unmapped": {
            "plangate": {
                "kind": record.kind,
                "seq": record.seq,
                "hash": record.hash,
                "prevHash": record.prev_hash,
                "format": record.format,
                "redacted": record.is_redacted(),
            }
        },
    }
    if record.seq:
        event["metadata"]["sequence"] = record.seq
    if record.plan_id:
        event["metadata"]["correlation_uid"] = record.plan_id
    if success is not None:
        event["status_id"] = SUCCESS if success else FAILURE
        event["status"] = "Success" if success else "Failure"
    if record.code:
        event["status_code"] = record.code
    if record.is_redacted():
        event["message"] = "emptied by the team's retention period; its place in the chain stays"
        return event
    plangate = event["unmapped"]["plangate"]
    if record.plan_hash:
        plangate["planHash"] = record.plan_hash
    if record.rule is not None:
        plangate["rule"] = record.rule
    if record.details:
        plangate["details"] = record.details
    return event


def _actor(record: AuditRecord) -> Event:
    """The agent as the actor's application and the member it acts for as its user; a
    person or a command acting in the console as the user."""
    actor: Event = {}
    if record.agent_id:
        actor["app_uid"] = record.agent_id
        actor["app_name"] = record.agent_name or record.agent_id
    if record.user:
        actor["user"] = {"email_addr": record.user, "name": record.user}
    elif record.actor and not record.actor.startswith("agent:"):
        actor["user"] = {"name": record.actor}
    if not actor:
        actor["app_name"] = record.actor or "plangate"
    return actor


def _policy(record: AuditRecord) -> Event | None:
    if not record.policy and record.policy_version is None:
        return None
    policy: Event = {"name": record.policy or "(unknown)", "uid": record.policy or "(unknown)"}
    if record.policy_version is not None:
        policy["version"] = str(record.policy_version)
    return policy


def _api_activity(
    record: AuditRecord,
    team_slug: str,
    *,
    activity_id: int,
    activity_name: str,
    operation: str,
    allowed: bool | None,
    severity_id: int | None = None,
) -> Event:
    """An agent's request through the API, or a decision of its guard, under the policy."""
    profiles = ("security_control",) if allowed is not None else ()
    event = _base(
        record,
        team_slug,
        class_uid=API_ACTIVITY,
        activity_id=activity_id,
        activity_name=activity_name,
        success=allowed,
        severity_id=severity_id or (INFORMATIONAL if allowed in (True, None) else LOW),
        profiles=profiles,
    )
    event["actor"] = _actor(record)
    event["api"] = {"operation": operation, "service": {"name": "plangate"}}
    if record.plan_id:
        event["api"]["request"] = {"uid": record.plan_id}
    event["src_endpoint"] = {"name": record.agent_name or record.actor or "plangate"}
    if record.agent_id:
        event["src_endpoint"]["uid"] = record.agent_id
    if allowed is None or record.is_redacted():
        return event
    event["action_id"] = ALLOWED if allowed else DENIED
    event["action"] = "Allowed" if allowed else "Denied"
    event["disposition_id"] = DISPOSITION_ALLOWED if allowed else DISPOSITION_BLOCKED
    event["disposition"] = "Allowed" if allowed else "Blocked"
    policy = _policy(record)
    if policy is not None:
        event["policy"] = policy
        event["actor"]["authorizations"] = [
            {"decision": record.code or ("allowed" if allowed else "refused"), "policy": policy}
        ]
    return event


def _entity_management(
    record: AuditRecord,
    team_slug: str,
    *,
    activity_id: int,
    activity_name: str,
    entity: Event,
    success: bool | None = True,
) -> Event:
    event = _base(
        record,
        team_slug,
        class_uid=ENTITY_MANAGEMENT,
        activity_id=activity_id,
        activity_name=activity_name,
        success=success,
    )
    event["entity"] = entity
    event["actor"] = _actor(record) if record.actor else {"app_name": "plangate"}
    if record.actor and not record.actor.startswith("agent:"):
        event["actor"]["user"] = {"name": record.actor}
    return event


def _plan_entity(record: AuditRecord) -> Event:
    entity: Event = {"type": "plan", "uid": record.plan_id or "(none)"}
    if record.plan_hash:
        entity["data"] = {"planHash": record.plan_hash}
    return entity


# --- one function per kind ---------------------------------------------------------------


def plan_issued(record: AuditRecord, team_slug: str) -> Event:
    return _api_activity(
        record,
        team_slug,
        activity_id=CREATE,
        activity_name="Create",
        operation="declare_plan",
        allowed=True,
    )


def plan_refused(record: AuditRecord, team_slug: str) -> Event:
    return _api_activity(
        record,
        team_slug,
        activity_id=CREATE,
        activity_name="Create",
        operation="declare_plan",
        allowed=False,
    )


def token_refreshed(record: AuditRecord, team_slug: str) -> Event:
    return _api_activity(
        record,
        team_slug,
        activity_id=UPDATE,
        activity_name="Update",
        operation="refresh_plan",
        allowed=True,
    )


def refresh_refused(record: AuditRecord, team_slug: str) -> Event:
    return _api_activity(
        record,
        team_slug,
        activity_id=UPDATE,
        activity_name="Update",
        operation="refresh_plan",
        allowed=False,
    )


def decision(record: AuditRecord, team_slug: str) -> Event:
    """A tool call the agent's guard decided: the tool is the operation, an OpenTelemetry
    GenAI ``execute_tool``."""
    tool = record.details.get("tool") if isinstance(record.details, dict) else None
    return _api_activity(
        record,
        team_slug,
        activity_id=OTHER,
        activity_name="execute_tool",
        operation=str(tool) if tool else "execute_tool",
        allowed=None if record.is_redacted() else record.code == "allowed",
    )


def decisions_lost(record: AuditRecord, team_slug: str) -> Event:
    return _api_activity(
        record,
        team_slug,
        activity_id=OTHER,
        activity_name="decisions_lost",
        operation="report_decisions",
        allowed=None,
        severity_id=MEDIUM,
    ) | {"status_id": FAILURE, "status": "Failure", "status_detail": "decisions not delivered"}


def plan_ended(record: AuditRecord, team_slug: str) -> Event:
    return _api_activity(
        record,
        team_slug,
        activity_id=UPDATE,
        activity_name="Update",
        operation="end_plan",
        allowed=None,
    ) | {"status_id": SUCCESS, "status": "Success"}


def plan_delegated(record: AuditRecord, team_slug: str) -> Event:
    return _api_activity(
        record,
        team_slug,
        activity_id=CREATE,
        activity_name="Create",
        operation="delegate_plan",
        allowed=True,
    )


def plan_revoked(record: AuditRecord, team_slug: str) -> Event:
    return _entity_management(
        record,
        team_slug,
        activity_id=DEACTIVATE,
        activity_name="Deactivate",
        entity=_plan_entity(record),
    )


def _approval(record: AuditRecord, team_slug: str, activity_id: int, name: str) -> Event:
    """A step of the approval queue, the plan's request for a person's approval."""
    return _entity_management(
        record,
        team_slug,
        activity_id=activity_id,
        activity_name=name,
        entity={"type": "approval", "uid": record.plan_id or "(none)"},
    )


def approval_requested(record: AuditRecord, team_slug: str) -> Event:
    return _approval(record, team_slug, CREATE, "Create")


def approval_decided(record: AuditRecord, team_slug: str) -> Event:
    return _approval(record, team_slug, UPDATE, "Update")


def approval_expired(record: AuditRecord, team_slug: str) -> Event:
    return _approval(record, team_slug, DEACTIVATE, "Deactivate")


def approval_notified(record: AuditRecord, team_slug: str) -> Event:
    return _approval(record, team_slug, OTHER, "notify")


def change(record: AuditRecord, team_slug: str) -> Event:
    """A console or operator change: Account Change for a person's account, Entity
    Management for any other object."""
    details = record.details if isinstance(record.details, dict) else {}
    kind = str(details.get("object") or "object")
    action = str(details.get("action") or "changed")
    name = str(details.get("name") or details.get("id") or kind)
    if kind in _ACCOUNT_OBJECTS and action in _ACCOUNT_ACTIVITIES and not record.is_redacted():
        activity_id = _ACCOUNT_ACTIVITIES[action]
        event = _base(
            record,
            team_slug,
            class_uid=ACCOUNT_CHANGE,
            activity_id=activity_id,
            activity_name=action.title(),
            success=True,
        )
        event["user"] = {"name": name, "type": kind}
        if "@" in name:
            event["user"]["email_addr"] = name
        if details.get("id") is not None:
            event["user"]["uid"] = str(details["id"])
        if record.actor:
            event["actor"] = {"user": {"name": record.actor}}
        return event
    activity_id = _ENTITY_ACTIVITIES.get(action, OTHER)
    entity: Event = {"type": kind, "name": name}
    if details.get("id") is not None:
        entity["uid"] = str(details["id"])
    return _entity_management(
        record,
        team_slug,
        activity_id=activity_id,
        activity_name=action.title() if activity_id != OTHER else action,
        entity=entity,
    )


MAPPINGS: dict[AuditRecord.Kind, Callable[[AuditRecord, str], Event]] = {
    AuditRecord.Kind.PLAN_ISSUED: plan_issued,
    AuditRecord.Kind.PLAN_REFUSED: plan_refused,
    AuditRecord.Kind.TOKEN_REFRESHED: token_refreshed,
    AuditRecord.Kind.REFRESH_REFUSED: refresh_refused,
    AuditRecord.Kind.DECISION: decision,
    AuditRecord.Kind.DECISIONS_LOST: decisions_lost,
    AuditRecord.Kind.PLAN_ENDED: plan_ended,
    AuditRecord.Kind.PLAN_REVOKED: plan_revoked,
    AuditRecord.Kind.CHANGE: change,
    AuditRecord.Kind.APPROVAL_REQUESTED: approval_requested,
    AuditRecord.Kind.APPROVAL_DECIDED: approval_decided,
    AuditRecord.Kind.APPROVAL_EXPIRED: approval_expired,
    AuditRecord.Kind.APPROVAL_NOTIFIED: approval_notified,
    AuditRecord.Kind.PLAN_DELEGATED: plan_delegated,
}
