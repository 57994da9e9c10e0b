"""Which database errors mean "the database cannot be reached" (503 database_unavailable).

The errors are the drivers' own, wrapped by Django's own DatabaseErrorWrapper as a query
on that driver would wrap them; tests/integration/test_database_outage.py cuts a real PostgreSQL.
"""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace

import psycopg
import pytest
from django.db.utils import DatabaseErrorWrapper

from kernel.problems import (
    PROBLEMS,
    Code,
    database_unavailable_error,
    exception_handler,
    is_database_unavailable,
)


def _as_django_raises(driver_error: Exception) -> Exception:
    """The exception Django raises for ``driver_error``, whichever database this run is on."""
    driver = psycopg if type(driver_error).__module__.startswith("psycopg") else sqlite3
    try:
        with DatabaseErrorWrapper(SimpleNamespace(Database=driver, errors_occurred=False)):
            raise driver_error
    except Exception as wrapped:
        return wrapped
    raise AssertionError("not raised")


@pytest.mark.parametrize(
    "driver_error",
    [
        psycopg.OperationalError("connection failed: Connection refused"),
        psycopg.OperationalError("consuming input failed: server closed the connection"),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.errors.CannotConnectNow("the database system is starting up"),
        psycopg.errors.TooManyConnections("sorry, too many clients already"),
        psycopg.errors.ConnectionFailure("connection failure"),
        psycopg.InterfaceError("the connection is closed"),
        sqlite3.OperationalError("unable to open database file"),
        sqlite3.OperationalError("database is locked"),
    ],
    ids=repr,
)
def test_a_lost_or_refused_connection_is_unavailability(driver_error):
    assert is_database_unavailable(_as_django_raises(driver_error))


@pytest.mark.parametrize(
    "driver_error",
    [
        psycopg.errors.UniqueViolation("duplicate key value"),
        psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
        psycopg.errors.DeadlockDetected("deadlock detected"),
        psycopg.errors.LockNotAvailable("could not obtain lock"),
        psycopg.errors.UndefinedTable('relation "plans_plan" does not exist'),
        psycopg.errors.DataError("invalid input syntax"),
        sqlite3.OperationalError("no such table: plans_plan"),
        sqlite3.IntegrityError("UNIQUE constraint failed"),
    ],
    ids=repr,
)
def test_a_failed_statement_is_not_unavailability(driver_error):
    assert not is_database_unavailable(_as_django_raises(driver_error))


def test_unavailability_is_a_503_problem_with_retry_after(settings, rf):
    settings.PLANGATE_DATABASE_RETRY_AFTER = 7
    request = rf.post("/v1/plans")
    lost = _as_django_raises(psycopg.OperationalError("server closed the connection"))

    response = exception_handler(lost, {"request": request, "view": None})

    assert response.status_code == 503
    assert response.content_type == "application/problem+json"
    assert response["Retry-After"] == "7"
    assert response.data["code"] == Code.DATABASE_UNAVAILABLE
    assert database_unavailable_error().status == PROBLEMS[Code.DATABASE_UNAVAILABLE].status == 503


def test_an_integrity_error_stays_a_server_error(rf):
    duplicate = _as_django_raises(psycopg.errors.UniqueViolation("duplicate key value"))

    response = exception_handler(duplicate, {"request": rf.post("/v1/plans"), "view": None})

    assert response.status_code == 500
    assert response.data["code"] == Code.SERVER_ERROR
    assert "Retry-After" not in response
