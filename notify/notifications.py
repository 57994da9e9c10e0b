"""Telling approvers that a plan awaits them: one e-mail to the team's approvers and one
notification to the team's webhook, both sent by the worker (``notify.tasks``).

Called once the plan's transaction has committed (``plans.approvals.approval_requested``
is sent on commit), and never raises: a plan's issuance must not depend on a mail server,
a webhook receiver or the broker (docs/decisions/0037).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from django.core.mail import send_mail
from django.utils import timezone

from plans.approvals import approval_queue_url, approval_unavailable_detail
from plans.models import Plan

from .models import TeamWebhook
from .records import approval_notified_record
from .selectors import approval_recipients

logger = logging.getLogger(__name__)

APPROVAL_REQUESTED = "approval_requested"


def approval_payload(plan: Plan, *, event: str = APPROVAL_REQUESTED) -> dict[str, Any]:
    """The webhook's JSON body (README "Approvals" documents it)."""
    return {
        "event": event,
        "plan": {
            "id": plan.pk,
            "goal": plan.goal,
            "user": plan.member.email,
            "agent": {"id": plan.agent_id, "name": plan.agent.name},
            "steps": plan.document.get("steps", []),
            "review": plan.review,
        },
        "team": plan.team.slug,
        "at": timezone.now().isoformat(),
        "url": approval_queue_url(plan),
    }


@dataclass(frozen=True)
class NotifyResult:
    email_queued: bool
    #: the notification's id (X-Plangate-Delivery), or None when no webhook was queued
    webhook_delivery: str | None


def approvers_notify(*, plan: Plan) -> NotifyResult:
    """Queue the approvers' e-mail and the team's webhook for ``plan``, for the worker: a
    slow mail server or receiver never holds up the request that declared the plan. Logs
    a failure to queue (the broker is away), never raises."""
    return NotifyResult(email_queued=_queue_email(plan), webhook_delivery=_queue_webhook(plan))


def approvers_email(*, plan: Plan) -> tuple[str, ...]:
    """E-mail the people who may decide on ``plan`` (``approval_recipients``: the team's
    approvers, else the superusers who may decide, else every superuser, told that nobody
    can) and append its ``approval_notified`` record; the recipients, () when there are
    none. Raises what the e-mail backend raises, so the task retries."""
    recipients = approval_recipients(plan)
    if not recipients.emails:
        return ()
    steps = plan.document.get("steps", [])
    lines = [
        f"The agent {plan.agent.name} asks to act for {plan.member.email}.",
        "",
        f"Goal: {plan.goal}",
        f"Steps: {', '.join(str(step.get('tool')) for step in steps)}",
        "",
    ]
    subject = f"[Plangate] Approval needed: {plan.goal[:80]}"
    if recipients.reach == "unavailable":
        subject = f"[Plangate] Nobody can approve: {plan.goal[:80]}"
        lines += [
            approval_unavailable_detail(plan),
            f"Add an approver to the team {plan.team.name}; the plan: {approval_queue_url(plan)}",
        ]
    else:
        if recipients.reach == "superusers":
            lines += [
                f"You are asked as a superuser: the team {plan.team.name} has no approver"
                f" other than {plan.member.email}, who cannot approve a plan made for"
                " themselves.",
                "",
            ]
        lines.append(f"Approve or deny it: {approval_queue_url(plan)}")
    send_mail(
        subject=subject,
        message="\n".join(lines),
        from_email=None,
        recipient_list=list(recipients.emails),
    )
    details: dict[str, Any] = {"channel": "email", "to": list(recipients.emails)}
    if recipients.reach != "team":
        details["reach"] = recipients.reach
    approval_notified_record(plan=plan, details=details)
    return recipients.emails


def _queue_email(plan: Plan) -> bool:
    from .tasks import email_approvers

    try:
        email_approvers.apply_async(kwargs={"plan_id": plan.pk})
    except Exception:
        # The broker is away: the plan waits as it should and the queue in the admin
        # shows it; this plan's e-mail is lost and the log says so.
        logger.exception("could not queue the approvers' e-mail of plan %s", plan.pk)
        return False
    return True


def approval_delivery(*, webhook: TeamWebhook, plan: Plan) -> dict[str, Any]:
    """The arguments of ``notify.tasks.deliver_webhook`` that tell ``webhook`` that ``plan``
    awaits approval, under a new delivery id (the receiver's key against duplicates)."""
    return {
        "webhook_id": webhook.pk,
        "delivery_id": str(uuid.uuid4()),
        "plan_id": plan.pk,
        "event": APPROVAL_REQUESTED,
        "payload": approval_payload(plan),
    }


def _queue_webhook(plan: Plan) -> str | None:
    from .tasks import deliver_webhook

    try:
        webhook = TeamWebhook.objects.filter(team_id=plan.team_id, active=True).first()
        if webhook is None:
            return None
        delivery = approval_delivery(webhook=webhook, plan=plan)
        deliver_webhook.apply_async(kwargs=delivery)
    except Exception:
        # As for the e-mail: logged with the plan's id, never raised.
        logger.exception("could not queue the approval webhook of plan %s", plan.pk)
        return None
    return delivery["delivery_id"]
