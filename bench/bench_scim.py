"""What a SCIM request costs as a team grows: the identity provider's usual question
(``GET /Users?filter=userName eq "..."``, asked before every create and update), a page of
users, and a patch that deactivates one, next to reading one user by id (the baseline),
measured in the same run for teams of 100, 1,000 and 5,000 members (``--scim-members``).

Filters are matched by scim2-models on the users as served (docs/decisions/0081), so a
filtered list reads the whole team: this bench says from what size that shows.

It runs in a child process with its own Django set-up on a temporary SQLite file (or a
throwaway PostgreSQL database when ``--database-url``/``DATABASE_URL`` names one), through
Django's test client: the view's and the database's work, without HTTP.
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
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--scim-members",
        default="100,1000,5000",
        help="team sizes, comma-separated (default 100,1000,5000)",
    )


def main(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(BENCH_DIR))
    from benchlib import heading, print_table
    from run import fernet_key, is_postgres, throwaway_postgres

    sizes = [int(size) for size in str(args.scim_members).split(",") if size.strip()]
    heading("SCIM: the provider's filter, a page and a deactivation, next to reading one user")
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="plangate-scim-")))
        if is_postgres(args.database_url):
            database_url = stack.enter_context(throwaway_postgres(args.database_url))
            database = "PostgreSQL (throwaway database)"
        else:
            database_url = f"sqlite:///{tmp / 'scim.sqlite3'}"
            database = "SQLite (temporary file)"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "PLANGATE_ENV_FILE": os.devnull,
            "SECRET_KEY": secrets.token_urlsafe(50),
            "KEY_ENCRYPTION_KEY": fernet_key(),
            "DATABASE_URL": database_url,
            "STATIC_ROOT": str(tmp),
            "LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT),
            "ALLOWED_HOSTS": "testserver",
        }
        child = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", *map(str, sizes)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
    if child.returncode != 0:
        print(f"the SCIM bench failed:\n{child.stdout}{child.stderr}")
        return 1
    figures = json.loads(child.stdout.strip().splitlines()[-1])
    rows = []
    for size in sizes:
        measured = figures[str(size)]
        base = measured["read"]
        for name, key in (
            ("GET /Users/{id} (baseline)", "read"),
            ('GET /Users?filter=userName eq "..."', "filter"),
            ("GET /Users?count=100", "page"),
            ("PATCH /Users/{id} active false, then true", "patch"),
        ):
            rows.append(
                [f"{size:,}", name, f"{measured[key]:,.2f}", f"{measured[key] / base:.1f}x"]
            )
    print(f"database: {database}; median of the repeats, in process (no HTTP)")
    print_table(["members", "request", "ms", "vs baseline"], rows)
    return 0


def _timed(call, repeats: int) -> float:
    """The median milliseconds of ``repeats`` calls, each answered 200."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        response = call()
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.content[:200]
    return sorted(samples)[len(samples) // 2]


def _measure(size: int) -> dict[str, float]:
    from django.test import Client

    from directory.tokens import scim_token_create
    from members.models import Member
    from members.services import team_get_or_create

    team = team_get_or_create(slug=f"bench-scim-{size}")
    # Seeded in bulk (the bench's set-up, not what it measures).
    Member.objects.bulk_create(
        Member(team=team, email=f"person{n}@bench.example.com", name=f"Person {n}")
        for n in range(size)
    )
    client = Client(HTTP_AUTHORIZATION=f"Bearer {scim_token_create(team=team, name='bench')[1]}")
    someone = Member.objects.filter(team=team).order_by("pk")[size // 2]
    user = f"/scim/v2/Users/{someone.pk}"
    who = f'userName eq "{someone.email}"'
    repeats = 30 if size <= 1000 else 7

    def patch(active: bool):
        body = {
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
            "Operations": [{"op": "replace", "value": {"active": active}}],
        }
        return client.patch(user, data=json.dumps(body), content_type="application/scim+json")

    return {
        "read": _timed(lambda: client.get(user), repeats),
        "filter": _timed(lambda: client.get("/scim/v2/Users", {"filter": who}), repeats),
        "page": _timed(lambda: client.get("/scim/v2/Users", {"count": 100}), repeats),
        "patch": _timed(lambda: (patch(False), patch(True))[1], repeats),
    }


def _child(sizes: list[int]) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    print(json.dumps({str(size): _measure(size) for size in sizes}))


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    _child([int(size) for size in sys.argv[2:]])
