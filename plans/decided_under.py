"""The policy version a guard decision was made under: the one home of the rule.

The guard reports the version *number* of the token it held (``PlanEvent.policy_version``,
or nothing for an older guard). The server resolves it to a PolicyVersion row from the
plan's tokens, once, when the decision arrives (plans.event_intake), and stores it on the
decision (``PlanEvent.decided_under``): the auditor's list filters, shows and exports that
column, read from an index, instead of recomputing it per row. Rows stored before the
column existed are resolved by the same function (migration 0007, ``decisions_backfill``).

The rule, for a decision made at ``occurred_at`` on a plan whose tokens are known:

1. it reported a number: the newest token carrying that number issued at or before the
   decision (the one in force); else the newest token carrying that number at all;
2. it reported none (or no token carries it): the newest token issued at or before the
   decision (the one in force by time);
3. it was stamped before the plan's first token (the agent's clock a little behind): the
   version the plan was issued with.

"Newest" is by (issued_at, id), as the plan's tokens are ordered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db import models, transaction

__all__ = [
    "TokenVersion",
    "decided_under",
    "decisions_backfill",
    "decisions_resolve",
    "plan_token_versions",
]


#: decisions resolved per transaction by ``decisions_backfill``
BACKFILL_BATCH_SIZE = 5000


class TokenVersion(NamedTuple):
    """What the rule reads of one of the plan's tokens."""

    issued_at: datetime
    id: int
    version_id: int
    number: int


def decided_under(
    *,
    tokens: Sequence[TokenVersion],
    plan_version_id: int,
    reported: int | None,
    occurred_at: datetime,
) -> int:
    """The id of the PolicyVersion a decision was made under; ``tokens`` are the plan's,
    oldest first (by issued_at, then id). See the module's docstring for the rule."""
    in_force: TokenVersion | None = None
    reported_any: TokenVersion | None = None
    reported_in_force: TokenVersion | None = None
    # Oldest first: the last match of each kind is the newest.
    for token in tokens:
        is_reported = reported is not None and token.number == reported
        if token.issued_at <= occurred_at:
            in_force = token
            if is_reported:
                reported_in_force = token
        if is_reported:
            reported_any = token
    chosen = reported_in_force or reported_any or in_force
    return chosen.version_id if chosen is not None else plan_version_id


def plan_token_versions(
    token_model: type[models.Model], plan_ids: Iterable[str]
) -> dict[str, list[TokenVersion]]:
    """The tokens of each plan named, oldest first, as the rule reads them: one query.
    ``token_model`` is PlanToken (or the migration's historical model of it)."""
    tokens: dict[str, list[TokenVersion]] = defaultdict(list)
    rows = (
        token_model._default_manager.filter(plan_id__in=list(plan_ids))
        .order_by("plan_id", "issued_at", "id")
        .values_list("plan_id", "issued_at", "id", "policy_version_id", "policy_version__number")
    )
    for plan_id, *token in rows:
        tokens[plan_id].append(TokenVersion(*token))
    return tokens


def decisions_backfill(
    *,
    event_model: type[models.Model],
    token_model: type[models.Model],
    plan_model: type[models.Model],
    batch_size: int | None = None,
    using: str = "default",
) -> int:
    """Resolve ``decided_under`` for every decision that has none, in batches of
    ``batch_size`` rows (BACKFILL_BATCH_SIZE) in primary-key order, each in its own
    transaction; the number of rows resolved. The models may be the migration's
    historical ones."""
    batch_size = batch_size or BACKFILL_BATCH_SIZE
    resolved = 0
    after = 0
    events: Any = event_model._default_manager.db_manager(using)
    while True:
        with transaction.atomic(using=using):
            rows = list(
                events.filter(decided_under__isnull=True, pk__gt=after)
                .order_by("pk")
                .values_list("pk", "plan_id", "occurred_at", "policy_version")[:batch_size]
            )
            if not rows:
                return resolved
            plan_ids = {plan_id for _, plan_id, _, _ in rows}
            tokens = plan_token_versions(token_model, plan_ids)
            plan_versions = dict(
                plan_model._default_manager.db_manager(using)
                .filter(pk__in=plan_ids)
                .values_list("pk", "policy_version_id")
            )
            by_version: dict[int, list[int]] = defaultdict(list)
            for pk, plan_id, occurred_at, reported in rows:
                version_id = decided_under(
                    tokens=tokens.get(plan_id, ()),
                    plan_version_id=plan_versions[plan_id],
                    reported=reported,
                    occurred_at=occurred_at,
                )
                by_version[version_id].append(pk)
            for version_id, pks in by_version.items():
                events.filter(pk__in=pks).update(decided_under_id=version_id)
            resolved += len(rows)
            after = rows[-1][0]


def decisions_resolve(events: Sequence[Any]) -> Sequence[Any]:
    """Unsaved decisions (PlanEvent instances built outside the intake: an import, a
    fixture) with ``decided_under`` set by the rule where it is unset, in two queries
    whatever their number; ``events`` back, for ``bulk_create``."""
    from .models import Plan, PlanToken

    unresolved = [event for event in events if event.decided_under_id is None]
    if not unresolved:
        return events
    plan_ids = {event.plan_id for event in unresolved}
    tokens = plan_token_versions(PlanToken, plan_ids)
    plan_versions = dict(
        Plan.objects.filter(pk__in=plan_ids).values_list("pk", "policy_version_id")
    )
    for event in unresolved:
        event.decided_under_id = decided_under(
            tokens=tokens.get(event.plan_id, ()),
            plan_version_id=plan_versions[event.plan_id],
            reported=event.policy_version,
            occurred_at=event.occurred_at,
        )
    return events
