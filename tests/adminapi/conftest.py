from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from adminapi.tokens import admin_token_create

# The console's personas, for the admin token pages.
from tests.admin.conftest import (  # noqa: F401
    superuser,
    superuser_client,
    team_admin,
    team_admin_client,
)


def token_client(team, *, write: bool = True, user=None) -> APIClient:
    """An API client holding a new admin token of ``team``."""
    _, plaintext = admin_token_create(team=team, name="tests", can_write=write, user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


@pytest.fixture
def admin_api(team) -> APIClient:
    return token_client(team, write=True)


@pytest.fixture
def read_api(team) -> APIClient:
    return token_client(team, write=False)
