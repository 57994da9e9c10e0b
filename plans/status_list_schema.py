"""The token status list in the OpenAPI schema.

``GET /v1/status-lists/{team_id}`` is a plain Django view (plans.status_list), which
drf-spectacular does not see; this postprocessing hook describes it, as
plans.status_feed_schema does the status feed, before ``kernel.openapi.problem_responses``
gives its refusals the Problem schema.
"""

from __future__ import annotations

from typing import Any

from .status_list import MEDIA_TYPE

OPERATION: dict[str, Any] = {
    "operationId": "status_lists_read",
    "summary": "The team's token status list (draft-ietf-oauth-status-list)",
    "description": (
        "A compact JWS (header `typ: statuslist+jwt`, `kid`, `alg` `EdDSA` or `Ed25519`)"
        " signed by the active key of `/v1/keys/jwks`, with claims `sub` (this URI), `iat`,"
        " `exp`, `ttl` (seconds: the team's poll interval) and `status_list: {bits: 1, lst}`,"
        " `lst` being the base64url of the zlib-compressed list. The status of a token is"
        " bit `idx % 8` (least significant first) of byte `idx // 8`, `idx` being its"
        " `status.status_list.idx`: 0 valid, 1 invalid (revoked, expired, its member, agent"
        " or API key disabled or revoked, its signing key revoked). No authentication;"
        " `Cache-Control: public` so that a proxy can serve it; send the last `ETag` in"
        " `If-None-Match` for a `304`."
    ),
    "tags": ["plans"],
    "security": [],
    "parameters": [
        {"name": "team_id", "in": "path", "required": True, "schema": {"type": "integer"}},
        {"name": "If-None-Match", "in": "header", "required": False, "schema": {"type": "string"}},
    ],
    "responses": {
        "200": {
            "description": "The status list token",
            "headers": {
                "ETag": {"schema": {"type": "string"}},
                "Cache-Control": {"schema": {"type": "string"}},
            },
            "content": {
                MEDIA_TYPE: {
                    "schema": {
                        "type": "string",
                        "description": "compact JWS",
                        "pattern": r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$",
                    }
                }
            },
        },
        "304": {"description": "Unchanged since the ETag sent"},
        "404": {"description": "No such team, or none of its tokens signed yet (`not_found`)"},
        "503": {"description": "No signing key is active (`no_signing_key`)"},
    },
}


def document_status_list(result: dict, generator, request, public) -> dict:
    """drf-spectacular POSTPROCESSING_HOOKS entry; see the module docstring."""
    result.setdefault("paths", {})["/v1/status-lists/{team_id}"] = {"get": OPERATION}
    return result
