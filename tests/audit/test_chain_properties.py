"""Whatever JSON a record carries, it seals into a chain that verifies, and changing that
JSON in the database is found."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.models import AuditRecord
from audit.services import records_seal
from audit.verification import chain_verify
from members.services import team_get_or_create
from tests.guard.strategies import json_values

from .helpers import append, sql

# Records pile up in one test transaction across examples: each example checks the whole
# chain so far, which is the point. The team is made once per test, not per example.
pytestmark = pytest.mark.django_db
TABLE = AuditRecord._meta.db_table
details_values = st.dictionaries(
    st.text(max_size=8).filter(lambda k: "\x00" not in k), json_values, max_size=4
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(details=details_values, rule=st.none() | json_values)
def test_any_json_seals_into_a_chain_that_verifies(details, rule):
    team = team_get_or_create(slug="props")
    append(team, 1, details=details, rule=rule)
    records_seal(team=team)
    report = chain_verify(team=team)
    assert report.intact, report.broken
    assert report.unsealed == 0


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(details=details_values, other=details_values)
def test_changing_a_records_json_in_the_database_is_found(details, other):
    team = team_get_or_create(slug="props")
    (record,) = append(team, 1, details=details)
    records_seal(team=team)
    stored = AuditRecord.objects.get(pk=record.pk).details
    sql(f"UPDATE {TABLE} SET details = %s WHERE id = %s", [json.dumps(other), record.pk])  # noqa: S608
    changed = AuditRecord.objects.get(pk=record.pk).details != stored
    report = chain_verify(team=team)
    assert report.intact is not changed
    if changed:
        assert report.broken is not None and report.broken.record_id == record.pk
        assert report.broken.problem == "changed"
    # Put it back for the next example.
    sql(f"UPDATE {TABLE} SET details = %s WHERE id = %s", [json.dumps(stored), record.pk])  # noqa: S608
