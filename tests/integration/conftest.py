"""Every test here starts real processes (gunicorn, Celery, a fresh virtualenv): `slow`, so
`make check` leaves them out while `make test` and CI run them."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Called with the whole session's items, so mark only the ones collected below here.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.slow)
