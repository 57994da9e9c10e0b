"""The status feed in the OpenAPI schema.

``GET /v1/plans/{id}/status`` is a plain Django view (plans.status_feed: a poll must cost
about what ``/healthz`` does), which drf-spectacular does not see; this postprocessing hook
describes it, before ``kernel.openapi.problem_responses`` gives its refusals the Problem
schema. The body's fields are those of ``PlanStatus.body``.
"""

from __future__ import annotations

from typing import Any

from .models import Plan
from .status_feed import FEED_STOP_CODES

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "plan": {"type": "string", "description": "the plan id"},
        "status": {"type": "string", "enum": sorted(Plan.Status.values)},
        "code": {
            "type": "string",
            "nullable": True,
            "enum": [*sorted(FEED_STOP_CODES), None],
            "description": "the decision every later call gets; null while the plan may go on",
        },
        "reason": {"type": "string"},
        "boundSeconds": {
            "type": "integer",
            "minimum": 1,
            "maximum": 60,
            "description": "the team's revocation bound",
        },
        "pollInterval": {
            "type": "number",
            "description": "seconds between two polls (half the bound)",
        },
    },
    "required": ["plan", "status", "code", "reason", "boundSeconds", "pollInterval"],
}

OPERATION: dict[str, Any] = {
    "operationId": "plans_status",
    "summary": "The plan's status, polled by running guards (ETag / If-None-Match)",
    "description": (
        "Whether the calling agent's plan may go on: revoked, past its lifetime, its member"
        " or agent disabled, or (with `kid`) the token's signing key revoked. Send the last"
        " `ETag` in `If-None-Match`: `304` while nothing changed. Not counted against the"
        " API key's rate limit."
    ),
    "tags": ["plans"],
    "security": [{"bearerAuth": []}],
    "parameters": [
        {"name": "plan_id", "in": "path", "required": True, "schema": {"type": "string"}},
        {
            "name": "kid",
            "in": "query",
            "required": False,
            "description": "the signing key id of the token the guard holds",
            "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
        },
        {
            "name": "If-None-Match",
            "in": "header",
            "required": False,
            "schema": {"type": "string"},
        },
        {
            "name": "DPoP",
            "in": "header",
            "required": False,
            "description": (
                "A DPoP proof (RFC 9449) by the key the plan is bound to; required for a"
                " bound plan (`401 invalid_dpop_proof` otherwise)"
            ),
            "schema": {"type": "string"},
        },
    ],
    "responses": {
        "200": {
            "description": "The plan's status",
            "headers": {"ETag": {"schema": {"type": "string"}}},
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/PlanStatus"}}
            },
        },
        "304": {"description": "Unchanged since the ETag sent"},
        "400": {"description": "`kid` is not a signing key id (`invalid_request`)"},
        "404": {"description": "No such plan for this agent (`plan_not_found`)"},
    },
}


def document_status_feed(result: dict, generator, request, public) -> dict:
    """drf-spectacular POSTPROCESSING_HOOKS entry; see the module docstring."""
    result.setdefault("components", {}).setdefault("schemas", {})["PlanStatus"] = STATUS_SCHEMA
    result.setdefault("paths", {})["/v1/plans/{plan_id}/status"] = {"get": OPERATION}
    return result
