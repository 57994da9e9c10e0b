"""The OpenAPI documentation of the plans API that is not a body's own declaration: the
refusals, examples, and the JWKS answers. The bodies are declared once, in
``plans.serializers``, which validates or renders them too (the event batch's shape is
``guard.events.event_batch_json_schema``)."""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    inline_serializer,
)
from rest_framework import serializers

# The schema itself (application/problem+json, `Problem`) is added to every error response
# by kernel.openapi.problem_responses.
PROBLEM = OpenApiResponse(description="RFC 9457 problem+json with a stable `code`")


def refusals(*statuses: int) -> dict[int, OpenApiResponse]:
    """The refusals an operation documents, each a problem+json."""
    return dict.fromkeys(statuses, PROBLEM)


# What signing a token again for a known plan can answer (refresh, an approved plan's token).
TOKEN_REFUSALS = refusals(400, 401, 403, 404, 409, 410, 429, 503)


# --- examples and the responses that are not JSON objects of ours ------------------------

plan_declaration_example = OpenApiExample(
    "Summarise open issues",
    request_only=True,
    value={
        "plan": {
            "version": 1,
            "goal": "Summarise open issues",
            "user": "alice@acme.dev",
            "steps": [
                {
                    "tool": "github_list_issues",
                    "args": {"repo": {"eq": "acme/public-app"}},
                    "maxCalls": 3,
                },
                {
                    "tool": "github_get_issue",
                    "args": {"repo": {"eq": "acme/public-app"}},
                },
            ],
        },
        "ttl": 900,
    },
)

plan_delegation_example = OpenApiExample(
    "List the issues, for a sub-agent",
    request_only=True,
    value={
        "plan": {
            "version": 1,
            "goal": "List the open issues",
            "user": "alice@acme.dev",
            "steps": [
                {
                    "tool": "github_list_issues",
                    "args": {"repo": {"eq": "acme/public-app"}},
                    "maxCalls": 2,
                },
            ],
        },
        "agent": "01JD0000000000000000000000",
        "ttl": 900,
    },
)

event_batch_accepted_response = inline_serializer(
    "EventBatchAccepted",
    {
        "events": serializers.IntegerField(),
        "displayUpdates": serializers.IntegerField(),
        "argumentsStored": serializers.BooleanField(),
        "lost": serializers.IntegerField(
            help_text=(
                "decisions this batch counted as lost on the plan: those the guard reported"
                " (`lost`), and, sent with the plan's intent token, those made after the"
                " token's expiry"
            )
        ),
        "duplicate": serializers.BooleanField(
            help_text="true (status 200): the batch was stored before; nothing was written"
        ),
    },
)

jwks_response = OpenApiResponse(
    description="JWK Set",
    response={
        "type": "object",
        "properties": {
            "keys": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "kty": {"type": "string", "enum": ["OKP"]},
                        "crv": {"type": "string", "enum": ["Ed25519"]},
                        "x": {"type": "string"},
                        "kid": {"type": "string"},
                        "alg": {
                            "type": "string",
                            "enum": ["EdDSA", "Ed25519"],
                            "description": (
                                "the name tokens are signed under (PLANGATE_SIGNING_ALG):"
                                " `EdDSA` (RFC 8037) or the fully specified `Ed25519`"
                                " (RFC 9864); both name the same Ed25519 signature"
                            ),
                        },
                        "use": {"type": "string", "enum": ["sig"]},
                    },
                    "required": ["kty", "crv", "x", "kid", "alg", "use"],
                },
            }
        },
        "required": ["keys"],
    },
)
jwks_not_modified_response = OpenApiResponse(
    description="Not modified: If-None-Match matched the ETag"
)
