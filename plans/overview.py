"""The console's overview: per team, what needs a look today. Read by the admin index.

Every figure is one grouped query over all the teams shown, so the page costs the same
number of queries for one team as for fifty.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, F, QuerySet, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from audit.models import AuditRecord
from guard.decisions import Decision
from members.models import ApiKey
from teams.models import Team

from . import keys
from .approvals import plans_awaiting_approval
from .models import Plan, PlanEvent

#: how far back "today's" figures look
WINDOW = timedelta(hours=24)
#: API keys that expire within this are shown as due for replacement
API_KEY_NOTICE = timedelta(days=7)
#: the latest activity records shown per team
ACTIVITY_SHOWN = 5
#: teams shown on the index (a superuser of a large installation filters the lists instead)
TEAMS_SHOWN = 20
#: the plans with the most blocked calls listed per team, each once with its total
BLOCKED_PLANS_SHOWN = 5


@dataclass(frozen=True)
class BlockedPlan:
    """One plan's blocked calls of the window, counted once: a runaway loop of one agent
    reads as one line with its total, not as many blocked calls."""

    plan_id: str
    goal: str
    agent: str
    blocked_calls: int


@dataclass(frozen=True)
class TeamOverview:
    team: Team
    active_plans: int
    blocked_calls: int
    refused_declarations: int
    refused_refreshes: int
    #: plans of the window whose guard refused their token (the agent never ran under it)
    tokens_refused: int
    #: plans of the window that lost guard decisions (their record is incomplete)
    decisions_lost: int
    api_keys_expiring: int
    latest_activity: tuple[AuditRecord, ...]
    #: plans waiting for a person's decision now (the approval queue), whatever their age
    awaiting_approval: int = 0
    #: how many plans the window's blocked calls came from
    plans_blocked: int = 0
    #: the BLOCKED_PLANS_SHOWN plans with the most blocked calls, most first
    blocked_plans: tuple[BlockedPlan, ...] = ()


@dataclass(frozen=True)
class Overview:
    now: datetime
    since: datetime
    #: API keys expiring before this are counted in ``api_keys_expiring``
    api_keys_notice_until: datetime
    teams: tuple[TeamOverview, ...]
    teams_not_shown: int
    keys: keys.RotationSchedule


def _counts(queryset: QuerySet, team_field: str) -> dict[int, int]:
    rows = queryset.order_by().values(team_field).annotate(total=Count("pk"))
    return {row[team_field]: row["total"] for row in rows}


def _blocked_plans(blocked_events: QuerySet) -> dict[int, list[BlockedPlan]]:
    """Per team, the BLOCKED_PLANS_SHOWN plans with the most of ``blocked_events``: one
    grouped, ranked query for every team shown."""
    per_plan = (
        blocked_events.order_by()
        .values("plan_id", "plan__team_id", "plan__goal", "plan__agent__name")
        .annotate(total=Count("pk"))
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F("plan__team_id")],
                order_by=[F("total").desc(), F("plan_id").desc()],
            ),
        )
        .filter(rank__lte=BLOCKED_PLANS_SHOWN)
        .order_by("plan__team_id", "rank")
    )
    shown: dict[int, list[BlockedPlan]] = defaultdict(list)
    for row in per_plan:
        shown[row["plan__team_id"]].append(
            BlockedPlan(
                plan_id=row["plan_id"],
                goal=row["plan__goal"],
                agent=row["plan__agent__name"],
                blocked_calls=row["total"],
            )
        )
    return shown


def overview_read(*, team_ids: list[int] | None, now: datetime | None = None) -> Overview:
    """The overview of the teams ``team_ids`` (None: every team), the first
    ``TEAMS_SHOWN`` by name."""
    now = now or timezone.now()
    since = now - WINDOW
    teams_queryset = Team.objects.order_by("name", "pk")
    if team_ids is not None:
        teams_queryset = teams_queryset.filter(pk__in=team_ids)
    teams = list(teams_queryset[: TEAMS_SHOWN + 1])
    not_shown = 0
    if len(teams) > TEAMS_SHOWN:
        teams = teams[:TEAMS_SHOWN]
        not_shown = teams_queryset.count() - TEAMS_SHOWN
    ids = [team.pk for team in teams]

    active = _counts(
        Plan.objects.filter(team_id__in=ids, status=Plan.Status.ACTIVE, expires_at__gt=now),
        "team_id",
    )
    blocked_events = PlanEvent.objects.filter(
        plan__team_id__in=ids, occurred_at__gte=since
    ).exclude(decision=Decision.ALLOWED)
    blocked: dict[int, int] = {}
    plans_blocked: dict[int, int] = {}
    for row in (
        blocked_events.order_by()
        .values("plan__team_id")
        .annotate(total=Count("pk"), plans=Count("plan_id", distinct=True))
    ):
        blocked[row["plan__team_id"]] = row["total"]
        plans_blocked[row["plan__team_id"]] = row["plans"]
    blocked_plans = _blocked_plans(blocked_events)
    awaiting = _counts(plans_awaiting_approval().filter(team_id__in=ids), "team_id")
    refused: dict[tuple[int, str], int] = {}
    for row in (
        AuditRecord.objects.filter(
            team_id__in=ids,
            kind__in=[AuditRecord.Kind.PLAN_REFUSED, AuditRecord.Kind.REFRESH_REFUSED],
            at__gte=since,
        )
        .order_by()
        .values("team_id", "kind")
        .annotate(total=Count("pk"))
    ):
        refused[(row["team_id"], row["kind"])] = row["total"]
    recent_plans = Plan.objects.filter(team_id__in=ids, created_at__gte=since)
    tokens_refused = _counts(recent_plans.filter(status=Plan.Status.TOKEN_REFUSED), "team_id")
    decisions_lost = _counts(recent_plans.filter(decisions_lost__gt=0), "team_id")
    expiring = _counts(
        ApiKey.objects.usable(now).filter(
            agent__team_id__in=ids, expires_at__lte=now + API_KEY_NOTICE
        ),
        "agent__team_id",
    )
    activity: dict[int, list[AuditRecord]] = defaultdict(list)
    latest = (
        AuditRecord.objects.filter(team_id__in=ids, kind=AuditRecord.Kind.CHANGE)
        .annotate(
            rank=Window(
                RowNumber(), partition_by=[F("team_id")], order_by=[F("at").desc(), F("id").desc()]
            )
        )
        .filter(rank__lte=ACTIVITY_SHOWN)
        .order_by("team_id", "-at", "-id")
    )
    for record in latest:
        activity[record.team_id].append(record)

    return Overview(
        now=now,
        since=since,
        api_keys_notice_until=now + API_KEY_NOTICE,
        teams=tuple(
            TeamOverview(
                team=team,
                active_plans=active.get(team.pk, 0),
                blocked_calls=blocked.get(team.pk, 0),
                refused_declarations=refused.get((team.pk, AuditRecord.Kind.PLAN_REFUSED), 0),
                refused_refreshes=refused.get((team.pk, AuditRecord.Kind.REFRESH_REFUSED), 0),
                tokens_refused=tokens_refused.get(team.pk, 0),
                decisions_lost=decisions_lost.get(team.pk, 0),
                api_keys_expiring=expiring.get(team.pk, 0),
                latest_activity=tuple(activity[team.pk]),
                awaiting_approval=awaiting.get(team.pk, 0),
                plans_blocked=plans_blocked.get(team.pk, 0),
                blocked_plans=tuple(blocked_plans[team.pk]),
            )
            for team in teams
        ),
        teams_not_shown=not_shown,
        keys=keys.rotation_schedule(),
    )
