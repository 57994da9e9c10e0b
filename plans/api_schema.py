"""The OpenAPI documentation of the plans API: the fields and serializers that only
describe bodies. The views in ``plans.api`` parse and answer; guard.plan and guard.events
validate, with the same limits these serializers publish."""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    extend_schema_field,
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
from guard.plan import plan_json_schema

from .models import Plan, PlanToken

# The schema itself (application/problem+json, `Problem`) is added to every error response
# by kernel.openapi.problem_responses.
PROBLEM = OpenApiResponse(description="RFC 9457 problem+json with a stable `code`")


def _openapi_30(schema: object) -> object:
    """A JSON Schema 2020-12 document as an OpenAPI 3.0 schema object: no `$schema`, `const`
    as a one-value `enum`, no `propertyNames` (3.0 has neither)."""
    if isinstance(schema, list):
        return [_openapi_30(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {
        key: _openapi_30(value)
        for key, value in schema.items()
        if key not in {"$schema", "const", "propertyNames"}
    }
    if "const" in schema:
        converted["enum"] = [schema["const"]]
    return converted


# The plan schema is an object, so its conversion is one too.
@extend_schema_field(cast(dict[str, Any], _openapi_30(plan_json_schema())))
class PlanDocumentField(serializers.JSONField):
    """The plan document; the server validates it with guard.plan.validate_plan."""


class TtlField(serializers.IntegerField):
    """A token's lifetime in seconds; plans.services.token_ttl_resolve checks it. Its bounds
    are settings, so the schema reads them when it is generated (TtlFieldSchema), not when
    this module is imported."""


class TtlFieldSchema(OpenApiSerializerFieldExtension):
    target_class = TtlField

    def map_serializer_field(self, auto_schema, direction) -> dict:
        return {
            "type": "integer",
            "minimum": settings.PLANGATE_TOKEN_MIN_TTL,
            "maximum": settings.PLANGATE_TOKEN_MAX_TTL,
            "description": "seconds; PLANGATE_TOKEN_TTL when left out",
        }


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


# --- request and response bodies built by hand in plans.api ---------------------------------

policy_ref = inline_serializer(
    "PolicyRef",
    {
        "id": serializers.CharField(help_text="the policy's slug"),
        "version": serializers.IntegerField(),
        "hash": serializers.CharField(),
    },
)
token_response = inline_serializer(
    "IntentToken",
    {
        "id": serializers.CharField(help_text="the plan id (ULID), the token's jti"),
        "token": serializers.CharField(help_text="compact JWS, EdDSA"),
        "planHash": serializers.CharField(),
        "expiresAt": serializers.DateTimeField(),
        "policy": policy_ref,
        "reportArguments": serializers.BooleanField(
            help_text="whether the guard should report call arguments, not only their digest"
        ),
    },
)

plan_declaration_request = inline_serializer(
    "PlanDeclaration",
    {
        "plan": PlanDocumentField(help_text="the plan document, version 1"),
        "ttl": TtlField(required=False),
    },
)
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

plan_refresh_request = inline_serializer(
    "PlanRefresh",
    {
        "token": serializers.CharField(help_text="the plan's last token, may be expired"),
        "ttl": TtlField(required=False),
    },
)

plan_detail_response = inline_serializer(
    "PlanDetail",
    {
        "id": serializers.CharField(help_text="the plan id (ULID)"),
        "status": serializers.ChoiceField(choices=Plan.Status.choices),
        "goal": serializers.CharField(),
        "user": serializers.CharField(help_text="the member's stored e-mail"),
        "agent": serializers.CharField(),
        "planHash": serializers.CharField(),
        "createdAt": serializers.DateTimeField(),
        "expiresAt": serializers.DateTimeField(),
        "revokedAt": serializers.DateTimeField(allow_null=True),
        "role": serializers.CharField(allow_null=True),
        "groups": serializers.ListField(child=serializers.CharField()),
        "policy": policy_ref,
        "steps": serializers.ListField(child=serializers.DictField()),
        "tokens": serializers.ListField(
            child=inline_serializer(
                "PlanTokenRecord",
                {
                    "kind": serializers.ChoiceField(choices=PlanToken.Kind.choices),
                    "kid": serializers.CharField(),
                    "issuedAt": serializers.DateTimeField(),
                    "expiresAt": serializers.DateTimeField(),
                    "policyVersion": serializers.IntegerField(),
                    "role": serializers.CharField(allow_null=True),
                    "groups": serializers.ListField(child=serializers.CharField()),
                },
            )
        ),
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
