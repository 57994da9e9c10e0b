"""The admin personas (tests/admin/conftest.py) for the policy pages tested here."""

from tests.admin.conftest import (  # noqa: F401 (fixtures)
    admin_groups,
    auditor,
    auditor_client,
    other_team_admin,
    superuser,
    superuser_client,
    team_admin,
    team_admin_client,
)
