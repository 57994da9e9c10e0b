"""Helpers for the plan API tests: counting what a request wrote, reading tokens."""

from __future__ import annotations

import base64
import json

from plans.models import Plan, PlanToken


def table_counts() -> tuple[int, int]:
    return Plan.objects.count(), PlanToken.objects.count()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_json(value: dict) -> str:
    return b64url(json.dumps(value, separators=(",", ":")).encode())


def decode_segment(segment: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


def claims_of(token: str) -> dict:
    return decode_segment(token.split(".")[1])


def assert_problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == code
    assert body["status"] == status
    return body
