"""How the admin's pages name the audit records of approvals (plans.approvals): a request
for approval, a notification, a person's decision, the request's expiry."""

from __future__ import annotations

from django.utils.html import format_html
from django.utils.safestring import SafeString

from audit.models import AuditRecord

APPROVAL_RECORD_LABELS: dict[str, str] = {
    AuditRecord.Kind.APPROVAL_REQUESTED: "approval requested",
    AuditRecord.Kind.APPROVAL_NOTIFIED: "approvers notified",
    AuditRecord.Kind.APPROVAL_DECIDED: "approval decided",
    AuditRecord.Kind.APPROVAL_EXPIRED: "approval expired",
}


#: why an e-mail about a waiting plan went to superusers (notify.selectors, 0057)
NOTIFIED_REACH = {
    "superusers": " (superusers: the team has no other approver)",
    "unavailable": " (superusers, told that nobody can approve it)",
}


def approval_record_summary(record: AuditRecord) -> tuple[str, str, SafeString]:
    """The record's label, badge and one-line summary: which steps asked for review, who
    decided what and why (from the record's details), or who acted."""
    what = record.details or {}
    if record.kind == AuditRecord.Kind.APPROVAL_DECIDED:
        summary = format_html(
            "{} by {}{}",
            what.get("decision", ""),
            what.get("by", "") or record.actor,
            format_html(" · reason: {}", what["reason"]) if what.get("reason") else "",
        )
        badge = "ok" if what.get("decision") == "approved" else "bad"
    elif record.kind == AuditRecord.Kind.APPROVAL_REQUESTED:
        # People count steps from 1 (plans.admin_display.step_label).
        steps = ", ".join(f"step {entry['step'] + 1}" for entry in what.get("review", []))
        summary, badge = format_html("review of {}", steps or "the plan"), "muted"
        if what.get("approval_unavailable"):
            summary = format_html("{} · {}", summary, what["approval_unavailable"])
            badge = "bad"
    elif record.kind == AuditRecord.Kind.APPROVAL_NOTIFIED and what.get("channel") == "email":
        summary = format_html(
            "e-mail to {}{}",
            ", ".join(what.get("to", [])) or "nobody",
            NOTIFIED_REACH.get(what.get("reach", ""), ""),
        )
        badge = "bad" if what.get("reach") == "unavailable" else "muted"
    else:
        summary, badge = format_html("{}", record.actor or "—"), "muted"
    return APPROVAL_RECORD_LABELS[record.kind], badge, summary
