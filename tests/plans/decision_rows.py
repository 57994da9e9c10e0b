"""Guard decisions written straight to the table by a test (the intake is the other way
in): each with the policy version it was made under, resolved by the server's own rule
(plans.decided_under.decisions_resolve), as the intake stores it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from plans.decided_under import decisions_resolve
from plans.models import PlanEvent


def decision_create(**fields: Any) -> PlanEvent:
    """``PlanEvent.objects.create(**fields)``, resolved."""
    event = PlanEvent(**fields)
    decisions_resolve([event])
    event.save(force_insert=True)
    return event


def decisions_bulk_create(events: Iterable[PlanEvent], **options: Any) -> list[PlanEvent]:
    """``PlanEvent.objects.bulk_create(events)``, resolved."""
    return PlanEvent.objects.bulk_create(decisions_resolve(list(events)), **options)
