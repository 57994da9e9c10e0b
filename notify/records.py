"""The audit trail's ``approval_notified`` records: who was told that a plan waits, how,
and whether it reached them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from audit.models import AuditRecord
from audit.services import record_append
from plans.models import Plan
from plans.records import _plan_fields as plan_record_fields  # one home of a plan's columns


def approval_notified_record(
    *, plan: Plan, details: dict[str, Any], at: datetime | None = None
) -> AuditRecord:
    """``details``: ``{"channel": "email", "to": [...]}`` or ``{"channel": "webhook",
    "url", "delivery", "attempts", "delivered", "status", "error"}``. The actor is the
    door's: the request that queued the plan for approval, or the webhook's task."""
    return record_append(
        **plan_record_fields(plan), kind=AuditRecord.Kind.APPROVAL_NOTIFIED, at=at, details=details
    )
