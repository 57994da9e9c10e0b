"""The OpenAPI documentation of the plans API that is not a body's own declaration: the
event batch (validated by guard.events, with the same limits these serializers publish),
examples, and the JWKS answers. The declaration, refresh, token and plan bodies are
declared once, in ``plans.serializers``, which validates or renders them too."""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    inline_serializer,
)
from rest_framework import serializers

from guard.decisions import (
    MAX_DISPLAY_UPDATES_PER_BATCH,
    MAX_EVENT_REASON_LENGTH,
    MAX_EVENT_TOOL_LENGTH,
    MAX_EVENTS_PER_BATCH,
    Decision,
)

# The schema itself (application/problem+json, `Problem`) is added to every error response
# by kernel.openapi.problem_responses.
PROBLEM = OpenApiResponse(description="RFC 9457 problem+json with a stable `code`")


# The event batch, for the schema only: guard.events validates it, with the same limits.
# Field names are the wire's (camelCase).
class GuardDecisionSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    tool = serializers.CharField(max_length=MAX_EVENT_TOOL_LENGTH)
    decision = serializers.ChoiceField(choices=[code.value for code in Decision])
    step = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    reason = serializers.CharField(required=False, max_length=MAX_EVENT_REASON_LENGTH)
    argsDigest = serializers.CharField(required=False)
    args = serializers.DictField(required=False)


class DisplayUpdateSerializer(serializers.Serializer):
    at = serializers.DateTimeField(required=False)
    message = serializers.DictField()


class EventBatchSerializer(serializers.Serializer):
    events = serializers.ListField(
        child=GuardDecisionSerializer(), required=False, max_length=MAX_EVENTS_PER_BATCH
    )
    displayUpdates = serializers.ListField(
        child=DisplayUpdateSerializer(), required=False, max_length=MAX_DISPLAY_UPDATES_PER_BATCH
    )


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

event_batch_accepted_response = inline_serializer(
    "EventBatchAccepted",
    {
        "events": serializers.IntegerField(),
        "displayUpdates": serializers.IntegerField(),
        "argumentsStored": serializers.BooleanField(),
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
                        "alg": {"type": "string", "enum": ["EdDSA"]},
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
