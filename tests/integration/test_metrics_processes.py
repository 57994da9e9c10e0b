"""/metrics under real gunicorn with two worker processes: the counts of every worker add up
(prometheus_client's multiprocess mode, PROMETHEUS_MULTIPROC_DIR), whichever worker answers
the scrape; and with LOG_FORMAT=json each request is one JSON line in the server's output."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import plan_document

from .processes import IS_POSTGRES, process_env, start_gunicorn, stop, tail
from .test_rate_limit_processes import seed_agent

WORKERS = 2
DECLARATIONS = 60
CLIENTS = 12
TOKEN = "metrics-token-for-the-process-test"
AT = "2026-11-30T09:00:00.250Z"
# What seed_agent's member and policy admit.
PLAN = plan_document(user="alice@limits.test", steps=[{"tool": "read_issue"}])


def server_env(tmp_path: Path, multiprocess_dir: Path) -> dict[str, str]:
    overrides = {
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "PLANGATE_ENV_FILE": os.devnull,
        "STATIC_ROOT": str(tmp_path),
        "CACHE_URL": "locmemcache://",
        "PLANGATE_RATE_LIMIT": "100000/min",
        "LOG_LEVEL": "WARNING",
        "REQUEST_LOG_LEVEL": "INFO",  # the request lines, and no other
        "LOG_FORMAT": "json",
        "METRICS_ENABLED": "true",
        "METRICS_TOKEN": TOKEN,
        "PROMETHEUS_MULTIPROC_DIR": str(multiprocess_dir),
    }
    if not IS_POSTGRES:
        overrides["DATABASE_URL"] = f"sqlite:///{tmp_path / 'metrics.sqlite3'}"
    return process_env(**overrides)


def scrape(base_url: str) -> dict[tuple[str, tuple], float]:
    # A new connection per scrape, so either worker may answer it.
    response = httpx.get(
        f"{base_url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
    )
    assert response.status_code == 200, response.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


@pytest.mark.django_db(transaction=True)
def test_counts_add_up_across_worker_processes_and_requests_log_as_json(tmp_path):
    multiprocess_dir = tmp_path / "prometheus"
    multiprocess_dir.mkdir()  # empty at start, as the README asks
    env = server_env(tmp_path, multiprocess_dir)
    api_key = seed_agent(env, tmp_path)
    headers = {"Authorization": f"Bearer {api_key}"}
    log = tmp_path / "gunicorn.log"
    process, base_url = start_gunicorn(env, log, workers=WORKERS)
    try:

        def declare(_: int) -> httpx.Response:
            with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
                return client.post("/v1/plans", json={"plan": PLAN})

        with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            declared = list(pool.map(declare, range(DECLARATIONS)))
        plan_id = declared[0].json()["id"]
        events = [{"at": AT, "tool": "read_issue", "decision": "allowed", "step": 0}] * 3
        batch = {"stream": "0" * 32, "seq": 1, "events": events, "lost": 2}
        accepted = httpx.post(
            f"{base_url}/v1/plans/{plan_id}/events", json=batch, headers=headers, timeout=60
        )
        scrapes = [scrape(base_url) for _ in range(4)]
    finally:
        stop(process)

    assert [response.status_code for response in declared] == [201] * DECLARATIONS, tail(log)
    assert accepted.status_code == 202, accepted.text
    for samples in scrapes:
        assert samples[("plangate_plan_issuance_total", (("code", "issued"),))] == DECLARATIONS
        count = samples[("plangate_plan_issuance_duration_seconds_count", ())]
        assert count == DECLARATIONS
        assert samples[("plangate_guard_events_received_total", ())] == 3
        assert samples[("plangate_guard_decisions_lost_total", ())] == 2
        assert samples[("plangate_signing_key_age_seconds", ())] >= 0

    request_lines = [
        line
        for line in (json.loads(text) for text in log.read_text().splitlines() if text[:1] == "{")
        if line["logger"] == "plangate.request"
    ]
    declarations = [line for line in request_lines if line["route"] == "plan-create"]
    assert len(declarations) == DECLARATIONS
    # Both workers answered some: the totals above are sums over processes.
    assert len({line["process"] for line in declarations}) == WORKERS
    assert {line["plan_id"] for line in declarations} == {
        response.json()["id"] for response in declared
    }
    assert {line["status"] for line in declarations} == {201}
    assert len({line["request_id"] for line in request_lines}) == len(request_lines)
