"""One log line per request, on the logger ``plangate.request``: JSON with LOG_FORMAT=json,
plain text otherwise; and the request id that names it, answered in X-Request-ID."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.test import Client

from kernel.log_format import JsonFormatter, RequestLineFormatter
from kernel.problems import Code
from tests.conftest import plan_document

ROOT = Path(__file__).resolve().parents[2]
REQUEST_LOGGER = logging.getLogger("plangate.request")


@contextmanager
def request_lines(formatter: logging.Formatter) -> Iterator[io.StringIO]:
    """What the request logger writes through `formatter`, as the settings' handler would."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    REQUEST_LOGGER.addHandler(handler)
    level = REQUEST_LOGGER.level
    REQUEST_LOGGER.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        REQUEST_LOGGER.removeHandler(handler)
        REQUEST_LOGGER.setLevel(level)


def json_lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_an_issuance_is_one_json_line_with_its_request_agent_and_plan(agent):
    with request_lines(JsonFormatter()) as stream:
        response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")

    assert response.status_code == 201
    [line] = json_lines(stream)
    assert line["logger"] == "plangate.request"
    assert line["level"] == "INFO"
    assert line["request_id"] == response["X-Request-ID"]
    assert (line["method"], line["path"], line["status"]) == ("POST", "/v1/plans", 201)
    assert line["route"] == "plan-create"
    assert line["agent"] == agent.agent.id
    assert line["plan_id"] == response.json()["id"]
    assert line["code"] is None
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] > 0


def test_a_refusal_logs_its_code_and_the_plan_of_its_url(agent):
    unknown = "01J0000000000000000000000Z"
    with request_lines(JsonFormatter()) as stream:
        response = agent.client.post(
            f"/v1/plans/{unknown}/refresh", {"token": "x.y.z"}, format="json"
        )

    [line] = json_lines(stream)
    assert line["status"] == response.status_code >= 400
    assert line["code"] == response.json()["code"]
    assert line["plan_id"] == unknown
    assert line["agent"] == agent.agent.id


def test_a_request_without_an_api_key_logs_no_agent(db):
    with request_lines(JsonFormatter()) as stream:
        response = Client().get("/v1/plans/01J0000000000000000000000Z")

    [line] = json_lines(stream)
    assert (line["status"], line["code"], line["agent"]) == (401, Code.INVALID_API_KEY, None)
    assert response.json()["code"] == Code.INVALID_API_KEY


def test_the_plain_line_names_the_request_and_leaves_out_what_it_lacks(db):
    with request_lines(RequestLineFormatter("%(levelname)s %(name)s %(message)s")) as stream:
        response = Client().get("/healthz")

    [line] = stream.getvalue().splitlines()
    start, _, rest = line.partition(" ms ")
    assert start.startswith("INFO plangate.request GET /healthz 200 ")
    assert rest == f"request_id={response['X-Request-ID']}"


def test_the_line_of_a_request_with_a_session_cookie_reads_nothing_from_the_database(
    admin_client, django_assert_num_queries
):
    """/healthz answers while the database is down, also for a signed-in admin: naming the
    request's agent must not load the session's user."""
    with request_lines(JsonFormatter()) as stream, django_assert_num_queries(0):
        response = admin_client.get("/healthz")

    assert response.status_code == 200
    [line] = json_lines(stream)
    assert (line["path"], line["agent"]) == ("/healthz", None)


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("req-7f3a.b_c:1", True),
        ("a" * 128, True),
        ("a" * 129, False),
        ("two words", False),
        ('x"}\n{"injected": 1', False),
    ],
    ids=["token", "longest", "too-long", "space", "injection"],
)
def test_a_plain_request_id_from_the_caller_is_kept_and_any_other_replaced(db, given, kept):
    response = Client().get("/healthz", HTTP_X_REQUEST_ID=given)

    answered = response["X-Request-ID"]
    if kept:
        assert answered == given
    else:
        assert answered != given
        assert len(answered) == 32 and int(answered, 16) >= 0


def test_every_response_has_its_own_request_id(db):
    client = Client()
    ids = {client.get("/healthz")["X-Request-ID"] for _ in range(5)}
    assert len(ids) == 5


def test_json_lines_carry_an_exception_and_values_json_cannot_hold():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("plangate.test").makeRecord(
            "plangate.test",
            logging.ERROR,
            __file__,
            1,
            "failed %s",
            ("here",),
            sys.exc_info(),
            extra={"where": Path("/tmp/x")},
        )

    line = json.loads(JsonFormatter().format(record))

    assert (line["message"], line["level"], line["where"]) == ("failed here", "ERROR", "/tmp/x")
    assert "ValueError: boom" in line["exception"]


SERVE_ONE_REQUEST = """
import django
django.setup()
from django.test import Client
from django.test.utils import setup_test_environment
setup_test_environment()
Client().get("/healthz", HTTP_X_REQUEST_ID="from-the-proxy-1")
Client().get("/no-such-page")
"""


@pytest.mark.slow
@pytest.mark.parametrize("log_format", ["json", "plain"])
def test_the_settings_write_requests_in_the_chosen_format(tmp_path, log_format):
    """The real process: settings.LOGGING as configured by LOG_FORMAT, its output read back."""
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "LOG_FORMAT": log_format,
    }
    result = subprocess.run(
        [sys.executable, "-c", SERVE_ONE_REQUEST],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    if log_format == "json":
        parsed = [json.loads(line) for line in lines]  # every line, not only the requests'
        requests = [line for line in parsed if line["logger"] == "plangate.request"]
        assert [(line["path"], line["status"]) for line in requests] == [
            ("/healthz", 200),
            ("/no-such-page", 404),
        ]
        assert requests[0]["request_id"] == "from-the-proxy-1"
        assert any(line["logger"] == "django.request" for line in parsed)  # Not Found, as JSON
    else:
        requests = [line for line in lines if " plangate.request " in line]
        assert len(requests) == 2
        assert " INFO plangate.request GET /healthz 200 " in requests[0]
        assert requests[0].endswith(" request_id=from-the-proxy-1")
        with pytest.raises(ValueError):
            json.loads(requests[0])
