"""The auditor's pages at scale: 1,000,000 plans and 10,000,000 guard decisions (opt-in).

Opt-in, because seeding takes minutes: ``python bench/run.py --only scale`` or ``--scale``
(with ``make bench``); ``--scale-plans`` and ``--scale-decisions`` set the size. It needs
PostgreSQL (``--database-url``/``DATABASE_URL``): it creates a throwaway database next to
it, migrates it, and seeds it in bulk on the server (``INSERT ... SELECT generate_series``):
several teams with their members and agents, a policy of three versions per team, plans in
every status spread over 400 days (a token each, a refresh for one in five), decisions
spread over the plans, among them one plan with 20,000, and the audit trail's sealed
records (one per plan issued and one per decision, as the intake writes them). Then
``ANALYZE``, and each of the auditor's pages is requested repeatedly through Django's test
client, signed in as an auditor of every team but one (so team scoping is part of every
query), and ``GET /v1/audit/records`` with an audit token. It prints p50 and p99 per page
and how long seeding took; the database is dropped at the end.

Target: every page and call under 300 ms at p50 and under 1 s at p99, whatever the size.
The figures are absolute (a page's wait is what an auditor feels), so say how loaded the
machine was; ``/healthz`` measured in the same run is printed as the baseline.

It runs in a child process with its own Django set-up, so it leaves the other plug-ins'
process alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
TARGET_P50_MS = 300.0
TARGET_P99_MS = 1000.0
#: a slow request is repeated less: at least 3 times, then until this many seconds passed
MAX_SECONDS_PER_REQUEST_KIND = 30.0
#: the plan every size has, with this many decisions (its page and timeline are timed)
BIG_PLAN_DECISIONS = 20_000
TEAMS = ("acme", "globex", "initech", "umbrella", "hooli")
#: the plans of each team, in TEAMS' order, as twentieths of the plans (plan number n goes
#: to the team whose slice holds n % 20, so every team's plans are spread over time): one
#: big team, smaller ones
TEAM_SLICES = (range(0, 10), range(10, 14), range(14, 17), range(17, 19), range(19, 20))
MEMBERS_PER_TEAM = 2000
AGENTS_PER_TEAM = 12
TOOLS = (
    "github_get_issue",
    "github_create_pr",
    "github_delete_repo",
    "slack_post_message",
    "jira_create_ticket",
    "s3_get_object",
    "s3_put_object",
    "shell_run",
)
BLOCKED = ("not_in_plan", "policy_denied", "max_calls_exceeded", "plan_expired", "plan_revoked")


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--scale",
        action="store_true",
        help="run the scale bench (opt-in: it seeds millions of rows; `--only scale` too)",
    )
    group.add_argument(
        "--scale-plans", type=int, default=1_000_000, help="plans seeded (default 1,000,000)"
    )
    group.add_argument(
        "--scale-decisions",
        type=int,
        default=10_000_000,
        help="guard decisions seeded (default 10,000,000)",
    )
    group.add_argument(
        "--scale-repeat", type=int, default=20, help="requests per page timed (default 20)"
    )


def selected(args: argparse.Namespace) -> bool:
    only = {name.strip() for name in (getattr(args, "only", None) or "").split(",")}
    return bool(getattr(args, "scale", False)) or "scale" in only


def main(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(BENCH_DIR))
    from benchlib import heading
    from run import fernet_key, is_postgres, throwaway_postgres

    if not selected(args):
        return 0  # opt-in: `make bench` alone does not seed millions of rows
    heading(
        f"Auditor's pages at scale: {args.scale_plans:,} plans, "
        f"{args.scale_decisions:,} guard decisions (PostgreSQL)"
    )
    if not is_postgres(args.database_url):
        print("needs PostgreSQL: set DATABASE_URL or --database-url (bulk seeding is SQL)")
        return 1
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="plangate-scale-")))
        database_url = stack.enter_context(throwaway_postgres(args.database_url))
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "PLANGATE_ENV_FILE": os.devnull,
            "SECRET_KEY": secrets.token_urlsafe(50),
            "KEY_ENCRYPTION_KEY": fernet_key(),
            "DATABASE_URL": database_url,
            "STATIC_ROOT": str(tmp),
            "LOG_LEVEL": "WARNING",
            "ALLOWED_HOSTS": "testserver,localhost",
            # The records API is timed by repeated calls with one token.
            "PLANGATE_RATE_LIMIT": "1000000/min",
            "PYTHONPATH": str(ROOT),
        }
        child = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                json.dumps(
                    {
                        "plans": max(1000, args.scale_plans),
                        "decisions": max(BIG_PLAN_DECISIONS * 2, args.scale_decisions),
                        "repeat": max(3, args.scale_repeat),
                    }
                ),
            ],
            cwd=ROOT,
            env=env,
            timeout=6 * 3600,
            check=False,
        )
    return 0 if child.returncode == 0 else 1


# --- the child: seeding -------------------------------------------------------------------


def plan_id_sql(number: str) -> str:
    """A ULID-shaped id (26 Crockford characters, time-ordered) for plan number ``number``;
    the decisions compute their plan's id with it instead of joining."""
    return (
        f"('01J' || lpad(upper(to_hex({number})), 8, '0')"
        f" || upper(substr(md5({number}::text), 1, 15)))"
    )


def plan_created_sql(number: str, plans: int) -> str:
    """Plan ``number``'s issue time: spread evenly over the last 400 days, oldest first."""
    return f"(now() - make_interval(secs => ({plans} - {number})::float8 / {plans} * 400 * 86400))"


BULK_TABLES = ("plans_plan", "plans_plantoken", "plans_planevent", "audit_auditrecord")


@contextlib.contextmanager
def bulk_loading(cursor: Any, tables: tuple[str, ...], timings: dict[str, float]) -> Any:
    """Load ``tables`` the way a restore does: without their secondary indexes (built again
    afterwards, by sorting, which is many times faster than millions of random inserts) and
    without foreign-key triggers (the seeded rows are consistent by construction)."""
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) "
        "AND indexname NOT IN (SELECT conname FROM pg_constraint)",
        [list(tables)],
    )
    indexes = cursor.fetchall()
    for name, _ in indexes:
        cursor.execute(f'DROP INDEX "{name}"')
    cursor.execute("SET session_replication_role = replica")
    cursor.execute("SET synchronous_commit = off")
    try:
        yield
    finally:
        cursor.execute("SET session_replication_role = DEFAULT")
        cursor.execute("SET maintenance_work_mem = '512MB'")
        timer = time.perf_counter()
        for _, definition in indexes:
            cursor.execute(definition)
        timings["indexes"] = time.perf_counter() - timer


def seed(plans: int, decisions: int) -> dict[str, Any]:
    from django.db import connection, transaction

    from audit.tokens import audit_token_create
    from members.models import Agent, Member
    from policies.models import Policy
    from policies.services import policy_set
    from teams.models import Team

    timings: dict[str, float] = {}
    started = time.perf_counter()
    teams: list[dict[str, Any]] = []
    for slug, twentieths in zip(TEAMS, TEAM_SLICES, strict=True):
        team = Team.objects.create(slug=slug, name=slug.title())
        for version in range(1, 4):
            policy_set(
                team=team,
                slug="default",
                document={
                    "version": 1,
                    "default": "deny",
                    "rules": [
                        {"effect": "allow", "tools": ["github_*", "s3_get_*"]},
                        {"effect": "deny", "tools": ["github_delete_*"]},
                        {"effect": "allow", "tools": ["slack_*", "jira_*"], "maxCalls": version},
                    ],
                },
                comment=f"v{version}",
            )
        policy_obj = Policy.objects.get(team=team, slug="default")
        versions = dict(policy_obj.versions.values_list("number", "pk"))
        Member.objects.bulk_create(
            Member(team=team, email=f"person{number}@{slug}.test", name=f"Person {number}")
            for number in range(MEMBERS_PER_TEAM)
        )
        agents = Agent.objects.bulk_create(
            Agent(team=team, name=f"{slug}-agent-{number}", policy=policy_obj)
            for number in range(AGENTS_PER_TEAM)
        )
        members = list(Member.objects.filter(team=team).order_by("pk").values_list("pk", flat=True))
        teams.append(
            {
                "team": team,
                "twentieths": twentieths,
                "members": (members[0], members[-1]),
                "agents": [agent.pk for agent in agents],
                "versions": versions,
            }
        )
    statuses = (
        "CASE WHEN n % 1000 = 7 THEN 'approval_denied' WHEN n % 100 < 70 THEN 'expired' "
        "WHEN n % 100 < 82 THEN 'completed' WHEN n % 100 < 88 THEN 'active' "
        "WHEN n % 100 < 93 THEN 'revoked' WHEN n % 100 < 97 THEN 'ended' "
        "ELSE 'token_refused' END"
    )
    tools = "ARRAY[" + ", ".join(f"'{tool}'" for tool in TOOLS) + "]"
    step = "jsonb_build_object('tool', ({tools})[1 + (n / {k} + {o}) % {c}], 'args', '{{}}'::jsonb)"
    steps = ", ".join(step.format(tools=tools, k=k, o=k, c=len(TOOLS)) for k in (1, 3, 7))
    timer = time.perf_counter()
    with connection.cursor() as cursor, bulk_loading(cursor, BULK_TABLES, timings):
        for entry in teams:
            low, high = entry["members"]
            agents = "ARRAY[" + ", ".join(f"'{agent}'" for agent in entry["agents"]) + "]"
            versions = entry["versions"]
            cursor.execute(  # the SQL holds the bench's own numbers and names only
                f"""
                INSERT INTO plans_plan (id, goal, document, hash, role, groups, status,
                    created_at, expires_at, revoked_at, revoked_by, revoke_reason, ended_at,
                    end_reason, decisions_lost, approval, approval_by, approval_reason, review,
                    agent_id, member_id, policy_version_id, team_id)
                SELECT {plan_id_sql("n")},
                    'Triage issue ' || n || ' and open a pull request',
                    jsonb_build_object('version', 1, 'goal', 'Triage issue ' || n,
                        'steps', jsonb_build_array({steps})),
                    md5(n::text) || md5((n + 0.5)::text), NULL, '[]'::jsonb, {statuses},
                    {plan_created_sql("n", plans)},
                    {plan_created_sql("n", plans)} + interval '1 hour',
                    CASE WHEN n % 100 BETWEEN 88 AND 92 THEN {plan_created_sql("n", plans)}
                        + interval '10 minutes' END,
                    '', '', NULL, '', 0,
                    CASE WHEN n % 1000 = 7 THEN 'denied' ELSE '' END, '', '', '[]'::jsonb,
                    ({agents})[1 + n % {len(entry["agents"])}],
                    {low} + (hashtext(n::text) & 2147483647) % {high - low + 1},
                    CASE WHEN n % 10 < 7 THEN {versions[3]} WHEN n % 10 < 9 THEN {versions[2]}
                        ELSE {versions[1]} END,
                    {entry["team"].pk}
                FROM generate_series(1, {plans}) AS n
                WHERE n % 20 BETWEEN {entry["twentieths"][0]} AND {entry["twentieths"][-1]}
                """  # noqa: S608
            )
        timings["plans"] = time.perf_counter() - timer
        timer = time.perf_counter()
        cursor.execute(
            """
            INSERT INTO plans_plantoken (plan_id, kind, kid, issued_at, expires_at, role,
                groups, policy_version_id)
            SELECT id, 'issue', 'bench-kid', created_at, created_at + interval '15 minutes',
                NULL, '[]'::jsonb, policy_version_id
            FROM plans_plan WHERE status <> 'approval_denied'
            UNION ALL
            SELECT id, 'refresh', 'bench-kid', created_at + interval '15 minutes',
                created_at + interval '30 minutes', NULL, '[]'::jsonb, policy_version_id
            FROM plans_plan WHERE hashtext(id) % 5 = 0 AND status <> 'approval_denied'
            """
        )
        timings["tokens"] = time.perf_counter() - timer
        # Decisions: the big plan (number 1, oldest) gets BIG_PLAN_DECISIONS; the rest are
        # spread over the others, several per plan, a plan's decisions within its hour.
        timer = time.perf_counter()
        spread = decisions - BIG_PLAN_DECISIONS
        # The version each decision was made under, as intake resolves it: every token of
        # a plan carries the plan's version, so it is the plan's (its team by p % 20, its
        # version by p % 10, as the plans were seeded).
        decided_under = (
            "CASE "
            + " ".join(
                f"WHEN p % 20 BETWEEN {entry['twentieths'][0]} AND {entry['twentieths'][-1]} "
                f"THEN CASE WHEN p % 10 < 7 THEN {entry['versions'][3]} "
                f"WHEN p % 10 < 9 THEN {entry['versions'][2]} ELSE {entry['versions'][1]} END"
                for entry in teams
            )
            + " END"
        )
        decision_code = (
            f"CASE WHEN d % 10 < 9 THEN 'allowed' ELSE "
            f"(ARRAY[{', '.join(repr(code) for code in BLOCKED)}])[1 + d % {len(BLOCKED)}] END"
        )
        for label, series, plan_number in (
            ("big plan", f"generate_series(1, {BIG_PLAN_DECISIONS})", "1"),
            (
                "others",
                f"generate_series(1, {spread})",
                f"(2 + (d::bigint * 7919) % {plans - 1})::int",
            ),
        ):
            cursor.execute(  # the SQL holds the bench's own numbers and names only
                f"""
                INSERT INTO plans_planevent (plan_id, occurred_at, received_at, tool, decision,
                    step, reason, rule_index, rule_description, policy_version, args_digest,
                    args, batch_id, decided_under_id)
                SELECT {plan_id_sql("p")},
                    {plan_created_sql("p", plans)}
                        + make_interval(secs => (d % 3500) + (d % 1000) / 1000.0),
                    {plan_created_sql("p", plans)} + make_interval(secs => (d % 3500) + 2),
                    ({tools})[1 + d % {len(TOOLS)}], {decision_code},
                    (d % 3)::smallint, '', (d % 3)::smallint, 'allow github_* (rules[0])',
                    CASE WHEN p % 10 < 7 THEN 3 WHEN p % 10 < 9 THEN 2 ELSE 1 END,
                    md5(d::text), NULL, NULL, {decided_under}
                FROM (SELECT d, {plan_number} AS p FROM {series} AS d) AS numbered
                """  # noqa: S608
            )
            timings[f"decisions ({label})"] = time.perf_counter() - timer
        timer = time.perf_counter()
        # One sealed record per plan issued and one per decision, numbered in each team's
        # chain, in one pass.
        cursor.execute("SET work_mem = '256MB'")
        cursor.execute(
            """
            INSERT INTO audit_auditrecord (team_id, at, kind, actor, agent_id, agent_name,
                "user", plan_id, plan_hash, policy, policy_version, code, rule, details,
                seq, prev_hash, hash, sealed_at)
            SELECT team_id, at, kind, 'agent:' || agent_id, agent_id, '', '', plan_id, '',
                'default', 3, code, NULL, '{}'::jsonb,
                row_number() OVER (PARTITION BY team_id ORDER BY at, plan_id), '',
                md5(plan_id || at::text) || md5(at::text || plan_id), now()
            FROM (
                SELECT plan.team_id, plan.created_at AS at, 'plan_issued' AS kind,
                    plan.agent_id, plan.id AS plan_id, '' AS code
                FROM plans_plan AS plan
                UNION ALL
                SELECT plan.team_id, event.occurred_at, 'decision', plan.agent_id, plan.id,
                    event.decision
                FROM plans_planevent AS event JOIN plans_plan AS plan ON plan.id = event.plan_id
            ) AS trail
            """
        )
        cursor.execute("RESET work_mem")
        timings["audit records"] = time.perf_counter() - timer
        cursor.execute(
            "INSERT INTO audit_auditchainhead (team_id, last_seq, last_hash, updated_at) "
            "SELECT team_id, max(seq), '', now() FROM audit_auditrecord GROUP BY team_id"
        )
    timer = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    timings["analyze"] = time.perf_counter() - timer
    timings["total"] = time.perf_counter() - started
    with transaction.atomic():
        _, audit_token = audit_token_create(team=teams[0]["team"], name="scale bench")
    first = teams[0]
    return {
        "timings": timings,
        "audit_token": audit_token,
        "teams": teams,
        "big_plan": _scalar(f"SELECT {plan_id_sql('1')}"),
        # Plan numbers of the first team: n % 20 in its slice.
        "some_plan": _scalar(f"SELECT {plan_id_sql(str(plans // 2 // 20 * 20))}"),
        "some_hash": _scalar(
            f"SELECT hash FROM plans_plan WHERE id = {plan_id_sql(str(plans // 3 // 20 * 20 + 2))}"  # noqa: S608
        ),
        "agent": first["agents"][3],
        "version_old": first["versions"][1],
        "member_email": "person42@acme.test",
    }


def _scalar(sql: str) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


# --- the child: timing --------------------------------------------------------------------


def auditor_client(teams: list[dict[str, Any]]):
    from django.contrib.auth.models import Group, User
    from django.test import Client

    user = User.objects.create_user("scale-auditor", "auditor@bench.test", is_staff=True)
    user.groups.add(Group.objects.get(name="Auditors"))
    for entry in teams[:-1]:
        entry["team"].staff.add(user)
    client = Client()
    client.force_login(user)
    return client


def timed(request: Callable[[], Any], repeat: int) -> tuple[list[float], int, int]:
    """Milliseconds of ``repeat`` requests after one unrecorded one (fewer, at least 3, for
    a request slow enough to pass MAX_SECONDS_PER_REQUEST_KIND), the status and the size
    of the body."""
    response = request()
    body = b"".join(response.streaming_content) if response.streaming else response.content
    samples: list[float] = []
    deadline = time.perf_counter() + MAX_SECONDS_PER_REQUEST_KIND
    for _ in range(repeat):
        if len(samples) >= 3 and time.perf_counter() > deadline:
            break
        start = time.perf_counter()
        response = request()
        body = b"".join(response.streaming_content) if response.streaming else response.content
        samples.append((time.perf_counter() - start) * 1000)
    return sorted(samples), response.status_code, len(body)


def pages(seeded: dict[str, Any]) -> list[tuple[str, str]]:
    from urllib.parse import urlencode

    from django.urls import reverse

    plans = reverse("admin:plans_plan_changelist")
    decisions = reverse("admin:plans_planevent_changelist")
    big = seeded["big_plan"]

    def query(base: str, **params: str) -> str:
        return f"{base}?{urlencode(params)}"

    return [
        ("plans list", plans),
        ("plans: search by member e-mail", query(plans, q=seeded["member_email"])),
        ("plans: search by plan id", query(plans, q=seeded["some_plan"])),
        ("plans: search by plan hash", query(plans, q=seeded["some_hash"])),
        ("plans: status revoked", query(plans, status__exact="revoked")),
        ("plans: status approval denied (rare)", query(plans, status__exact="approval_denied")),
        ("plans: agent filter", query(plans, agent=seeded["agent"])),
        ("plans: planned tool filter", query(plans, tool="github_delete_repo")),
        ("plans: member e-mail filter", query(plans, member_email=seeded["member_email"])),
        ("plans: page 50", query(plans, p="50")),
        ("plan page (20,000 decisions)", reverse("admin:plans_plan_change", args=[big])),
        ("plan timeline (20,000 decisions)", reverse("admin:plans_plan_timeline", args=[big])),
        ("decisions list", decisions),
        ("decisions: search by plan id", query(decisions, q=seeded["some_plan"])),
        ("decisions: the big plan's", query(decisions, q=big)),
        ("decisions: any blocked", query(decisions, decision="blocked")),
        ("decisions: agent filter", query(decisions, agent=seeded["agent"])),
        ("decisions: tool filter", query(decisions, tool="shell_run")),
        ("decisions: member e-mail", query(decisions, member_email=seeded["member_email"])),
        (
            "decisions: policy version (old)",
            query(decisions, policy_version=str(seeded["version_old"])),
        ),
        ("decisions: page 50", query(decisions, p="50")),
        (
            "export: the big plan's decisions (CSV)",
            query(reverse("admin:plans_planevent_export_csv"), q=big),
        ),
        (
            "export: a member's plans (CSV)",
            query(reverse("admin:plans_plan_export_csv"), member_email=seeded["member_email"]),
        ),
        ("audit trail list", reverse("admin:audit_auditrecord_changelist")),
        (
            "audit trail: search by plan id",
            query(reverse("admin:audit_auditrecord_changelist"), q=seeded["some_plan"]),
        ),
    ]


def child(options: dict[str, Any]) -> int:
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    sys.path.insert(0, str(BENCH_DIR))
    from benchlib import percentile, print_table

    load = os.getloadavg()[0]
    timer = time.perf_counter()
    call_command("migrate", verbosity=0)
    migrate_seconds = time.perf_counter() - timer
    seeded = seed(options["plans"], options["decisions"])
    timings = seeded["timings"]
    print(
        f"migrated in {migrate_seconds:.1f} s; seeded in {timings['total']:.0f} s ("
        + ", ".join(
            f"{name} {seconds:.0f} s" for name, seconds in timings.items() if name != "total"
        )
        + f"); load average {load:.2f} at start",
        flush=True,
    )
    repeat = options["repeat"]
    client = auditor_client(seeded["teams"])
    anonymous = Client()
    rows = []

    def add(name: str, request: Callable[[], Any]) -> None:
        samples, status, size = timed(request, repeat)
        p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
        meets = "yes" if p50 < TARGET_P50_MS and p99 < TARGET_P99_MS and status == 200 else "NO"
        rows.append(
            (name, f"{p50:.0f}", f"{p99:.0f}", len(samples), status, f"{size / 1024:.0f}", meets)
        )
        print(f"  {name}: p50 {p50:.0f} ms, p99 {p99:.0f} ms ({status})", flush=True)

    add("/healthz (baseline)", lambda: anonymous.get("/healthz"))
    for name, url in pages(seeded):
        add(name, lambda url=url: client.get(url))
    authorization = {"HTTP_AUTHORIZATION": f"Bearer {seeded['audit_token']}"}
    add(
        "GET /v1/audit/records (first page)",
        lambda: anonymous.get("/v1/audit/records", **authorization),
    )
    middle = options["decisions"] // 4
    add(
        "GET /v1/audit/records (deep cursor, limit 1000)",
        lambda: anonymous.get(f"/v1/audit/records?after={middle}&limit=1000", **authorization),
    )
    print()
    print_table(["request", "p50 ms", "p99 ms", "runs", "status", "KiB", "target met"], rows)
    print(
        f"\n{repeat} requests each (fewer when slow) after one unrecorded; "
        f"target p50 < {TARGET_P50_MS:.0f} ms, p99 < {TARGET_P99_MS:.0f} ms. "
        f"Seeding took {timings['total']:.0f} s."
    )
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    sys.exit(child(json.loads(sys.argv[2])))
