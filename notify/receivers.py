"""Signal receivers of the notify app, connected in ``NotifyConfig.ready``."""

from __future__ import annotations

import logging
from typing import Any

from .notifications import approvers_notify

logger = logging.getLogger(__name__)


def approvers_notify_on_request(sender: Any, *, plan: Any, **kwargs: Any) -> None:
    """A plan started to wait for a person: tell the approvers. Never raises."""
    try:
        approvers_notify(plan=plan)
    except Exception:  # a notification never breaks the request that issued the plan
        logger.exception("notifying the approvers of plan %s failed", getattr(plan, "pk", "?"))


def slack_approval_on_request(sender: Any, *, plan: Any, **kwargs: Any) -> None:
    """A plan started to wait: post it, with Approve / Deny, to the team's Slack if any."""
    from .alert_delivery import slack_approval_queue

    try:
        slack_approval_queue(plan=plan)
    except Exception:
        logger.exception("posting plan %s to Slack failed", getattr(plan, "pk", "?"))


def alert_on_rotation_failure(sender: Any, *, detail: str, **kwargs: Any) -> None:
    """The signing-key rotation failed: the teams with a rule for it are alerted."""
    from .alerts import key_rotation_failed_raise

    try:
        key_rotation_failed_raise(detail=detail)
    except Exception:  # the rotation's own failure is what the log must show
        logger.exception("raising the key-rotation alert failed")
