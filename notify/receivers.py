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
