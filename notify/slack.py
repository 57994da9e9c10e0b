"""Slack: a team's incoming webhook (stored encrypted), the messages posted to it (alerts,
and approval requests with Approve / Deny buttons), and the answer to a button pressed
(``POST /v1/slack/interactions``), decided through ``plans.approvals`` as in the queue.

Slack signs each interaction request (``X-Slack-Signature``: ``v0=`` and the hex
HMAC-SHA256 of ``v0:<X-Slack-Request-Timestamp>:<body>`` under the app's signing secret);
``slack_sdk.signature.SignatureVerifier`` checks it, and a timestamp more than five minutes
from now, as Slack documents. Slack names the person who pressed a button by their Slack
user id only; a team maps those ids to console users (``SlackUserLink``, docs/alerts.md).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from cryptography.fernet import InvalidToken
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.changes import change_append
from guard.errors import FieldError
from kernel.problems import Code, DomainError
from plans.approvals import approval_queue_url, plan_approval_decide
from plans.keys.encryption import EncryptionKeyError, encryption_keys
from plans.models import Plan
from teams.models import Team

from .models import Alert, SlackUserLink, TeamSlack

logger = logging.getLogger(__name__)

APPROVE_ACTION = "plangate_approve"
DENY_ACTION = "plangate_deny"
REASON_BLOCK = "plangate_reason"
REASON_ACTION = "reason"
#: how far Slack's request timestamp may be from now (Slack's own figure)
MAX_REQUEST_AGE_SECONDS = 60 * 5
SLACK_WEBHOOK_PREFIX = "https://hooks.slack.com/"


# --- the team's connection ----------------------------------------------------------


def team_slack_save(*, team: Team, webhook_url: str = "", active: bool = True) -> TeamSlack:
    """Create or update the team's Slack connection; an empty ``webhook_url`` keeps the
    stored one. The URL is a bearer secret: stored encrypted, logged only as changed."""
    webhook_url = webhook_url.strip()
    if webhook_url and not webhook_url.startswith(slack_url_prefixes()):
        raise DomainError(
            Code.INVALID_REQUEST,
            "That is not a Slack incoming webhook URL.",
            errors=[FieldError("webhook_url", f"starts with {SLACK_WEBHOOK_PREFIX} (Slack's own)")],
        )
    with transaction.atomic():
        slack = TeamSlack.objects.select_for_update().filter(team=team).first()
        created = slack is None
        if slack is None:
            if not webhook_url:
                raise DomainError(
                    Code.INVALID_REQUEST,
                    "A new Slack connection needs its incoming webhook URL.",
                    errors=[FieldError("webhook_url", "is required")],
                )
            slack = TeamSlack(team=team)
        changes: dict[str, list[Any]] = {}
        if created or slack.active != active:
            changes["active"] = [None if created else slack.active, active]
        slack.active, slack.updated_at = active, timezone.now()
        if webhook_url:
            slack.webhook_url_encrypted = (
                encryption_keys().encrypt(webhook_url.encode()).decode("ascii")
            )
            changes["webhook_url"] = [None if created else "(set)", "(changed)"]
        slack.save()
        if changes:
            change_append(
                team=team,
                object_type="slack_connection",
                object_id=slack.pk,
                name="Slack",
                action="created" if created else "updated",
                changes=changes,
            )
    return slack


def slack_webhook_url(slack: TeamSlack) -> str:
    try:
        return encryption_keys().decrypt(slack.webhook_url_encrypted.encode("ascii")).decode()
    except InvalidToken as exc:
        raise EncryptionKeyError(
            f"the Slack webhook URL of team {slack.team_id} cannot be decrypted with "
            "KEY_ENCRYPTION_KEY"
        ) from exc


def slack_url_prefixes() -> tuple[str, ...]:
    """Where Plangate posts to Slack: Slack's hooks host, plus SLACK_EXTRA_URL_PREFIXES."""
    return (SLACK_WEBHOOK_PREFIX, *settings.SLACK_EXTRA_URL_PREFIXES)


def slack_post(*, url: str, message: dict[str, Any]) -> tuple[int | None, str]:
    """POST ``message`` to a Slack incoming webhook or response URL once, with slack-sdk's
    WebhookClient: the status code (None when none answered) and an error, "" on 2xx."""
    # Here, not at import: only the worker posts (the web server loads no HTTP client).
    from slack_sdk.webhook import WebhookClient

    if not url.startswith(slack_url_prefixes()):
        return None, "not a Slack URL"
    try:
        response = WebhookClient(url, timeout=int(settings.PLANGATE_WEBHOOK_TIMEOUT)).send_dict(
            message
        )
    except Exception as exc:  # urllib's errors: a refused connection, a timeout, TLS
        return None, f"{type(exc).__name__}: {exc}"[:500]
    if not 200 <= response.status_code < 300:
        return response.status_code, f"answered {response.status_code}: {response.body}"[:500]
    return response.status_code, ""


def _escape(text: str) -> str:
    """Slack's mrkdwn escapes: &, < and > (the rest is shown as typed)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def alert_message(alert: Alert) -> dict[str, Any]:
    count = f" (seen {alert.count} times)" if alert.count > 1 else ""
    return {
        "text": f"Plangate alert: {alert.summary}",
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f":rotating_light: *{_escape(alert.get_kind_display())}*{count}\n"
                    f"{_escape(alert.summary)}",
                },
            },
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"<{alert.url}|Open in Plangate>"}],
            },
        ],
    }


def approval_message(plan: Plan) -> dict[str, Any]:
    """The approval request with its Approve / Deny buttons (value: the plan id) and a
    box for the reason a denial needs."""
    steps = ", ".join(str(step.get("tool")) for step in plan.document.get("steps", []))
    return {
        "text": f"Plangate: approval needed: {plan.goal[:80]}",
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f"*Approval needed*: {_escape(plan.goal[:500])}\n"
                    f"The agent {_escape(plan.agent.name)} asks to act for"
                    f" {_escape(plan.member.email)}.\nSteps: {_escape(steps[:1000])}",
                },
            },
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": True,
                "label": {"type": "plain_text", "text": "Reason (needed to deny)"},
                "element": {"type": "plain_text_input", "action_id": REASON_ACTION},
            },
            {
                "type": "actions",
                "block_id": "plangate_decide",
                "elements": [
                    {
                        "type": "button",
                        "action_id": APPROVE_ACTION,
                        "style": "primary",
                        "text": {"type": "plain_text", "text": "Approve"},
                        "value": plan.pk,
                    },
                    {
                        "type": "button",
                        "action_id": DENY_ACTION,
                        "style": "danger",
                        "text": {"type": "plain_text", "text": "Deny"},
                        "value": plan.pk,
                    },
                ],
            },
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": f"<{approval_queue_url(plan)}|Open the queue>"}
                ],
            },
        ],
    }


# --- interactions -------------------------------------------------------------------


def slack_request_verify(*, body: bytes, timestamp: str, signature: str) -> None:
    """Raise ``invalid_slack_signature`` unless Slack signed ``body`` (with
    SLACK_SIGNING_SECRET) at ``timestamp``, within five minutes of now."""
    from slack_sdk.signature import SignatureVerifier

    secret = settings.SLACK_SIGNING_SECRET
    if not secret:
        raise DomainError(
            Code.INVALID_SLACK_SIGNATURE, "Slack is not set up here (SLACK_SIGNING_SECRET)."
        )
    if not timestamp.isdigit() or len(timestamp) > 12:
        raise DomainError(
            Code.INVALID_SLACK_SIGNATURE, "X-Slack-Request-Timestamp is missing or not a number."
        )
    if abs(time.time() - int(timestamp)) > MAX_REQUEST_AGE_SECONDS:
        raise DomainError(
            Code.INVALID_SLACK_SIGNATURE,
            "X-Slack-Request-Timestamp is more than five minutes from now.",
        )
    if not SignatureVerifier(secret).is_valid(body=body, timestamp=timestamp, signature=signature):
        raise DomainError(Code.INVALID_SLACK_SIGNATURE, "X-Slack-Signature does not match.")


@dataclass(frozen=True)
class SlackAnswer:
    """The message answering a button press: ephemeral (to the presser only) for a
    refusal, or replacing the original message once decided."""

    message: dict[str, Any]
    response_url: str
    decided: bool


def _ephemeral(text: str) -> dict[str, Any]:
    return {"response_type": "ephemeral", "replace_original": False, "text": text}


def _payload(body: bytes) -> dict[str, Any]:
    """The interaction's JSON (the form field ``payload``), or ``invalid_request``."""
    try:
        values = parse_qs(body.decode("utf-8"), strict_parsing=False).get("payload", [])
        payload = json.loads(values[0]) if len(values) == 1 else None
    except (UnicodeDecodeError, ValueError):
        payload = None
    if not isinstance(payload, dict):
        raise not_an_interaction()
    return payload


def not_an_interaction() -> DomainError:
    return DomainError(
        Code.INVALID_REQUEST,
        "The body is not a Slack interaction.",
        errors=[FieldError("payload", "a form field holding one JSON object")],
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def slack_interaction_handle(*, body: bytes) -> SlackAnswer:
    """Decide on the plan a button names, as the console user the Slack user is linked to
    (``plan_approval_decide``: self-approval refused, the approver must be allowed, a
    denial needs the reason typed in the message). Refusals are answered, not raised."""
    payload = _payload(body)
    response_url = _text(payload.get("response_url"))
    actions = payload.get("actions")
    action = actions[0] if isinstance(actions, list) and actions else None
    if (
        payload.get("type") != "block_actions"
        or not isinstance(action, dict)
        or action.get("action_id") not in (APPROVE_ACTION, DENY_ACTION)
    ):
        return SlackAnswer(_ephemeral("Plangate does not handle this action."), response_url, False)
    approve = action["action_id"] == APPROVE_ACTION
    plan = (
        Plan.objects.select_related("team", "agent", "member", "policy_version__policy")
        .filter(pk=_text(action.get("value"))[:26])
        .first()
    )
    if plan is None or not TeamSlack.objects.filter(team=plan.team_id, active=True).exists():
        return SlackAnswer(_ephemeral("Plangate knows no such plan here."), response_url, False)
    slack_user = payload.get("user")
    slack_user_id = _text(slack_user.get("id")) if isinstance(slack_user, dict) else ""
    link = (
        SlackUserLink.objects.select_related("user")
        .filter(team=plan.team_id, slack_user_id=slack_user_id)
        .first()
    )
    if link is None:
        return SlackAnswer(
            _ephemeral(
                f"Your Slack user ({slack_user_id or 'unknown'}) is not linked to a console user"
                f" of the team {plan.team.name}: an admin adds it under Slack users. Decide in"
                f" the queue meanwhile: {approval_queue_url(plan)}"
            ),
            response_url,
            False,
        )
    reason = _reason(payload)
    try:
        decision = plan_approval_decide(
            plan=plan, by_user=link.user, approve=approve, reason=reason
        )
    except DomainError as error:
        return SlackAnswer(
            _ephemeral(f"Not decided ({error.code}): {error.detail}"), response_url, False
        )
    verb = "Approved" if decision.approved else "Denied"
    text = f"{verb} by {decision.by}: {plan.goal[:200]}"
    if decision.reason:
        text += f"\nReason: {decision.reason}"
    return SlackAnswer({"replace_original": True, "text": text}, response_url, decided=True)


def _reason(payload: dict[str, Any]) -> str:
    state = payload.get("state")
    values = state.get("values") if isinstance(state, dict) else None
    block = values.get(REASON_BLOCK) if isinstance(values, dict) else None
    field = block.get(REASON_ACTION) if isinstance(block, dict) else None
    return _text(field.get("value")) if isinstance(field, dict) else ""


def slack_answer_queue(answer: SlackAnswer) -> None:
    """Send the answer to Slack's ``response_url`` from the worker (never raises)."""
    if not answer.response_url:
        return
    from .tasks import slack_respond

    try:
        slack_respond.apply_async(
            kwargs={"response_url": answer.response_url, "message": answer.message}
        )
    except Exception:
        logger.exception("could not queue the answer to a Slack interaction")
