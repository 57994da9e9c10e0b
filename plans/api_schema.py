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
    MAX_BATCH_SEQUENCE,
    MAX_DISPLAY_UPDATES_PER_BATCH,
    MAX_END_REASON_LENGTH,
    MAX_EVENT_REASON_LENGTH,
    MAX_EVENT_RULE_DESCRIPTION_LENGTH,
    MAX_EVENT_TOOL_LENGTH,
    MAX_EVENTS_PER_BATCH,
    MAX_LOST_PER_BATCH,
    MAX_STREAM_ID_LENGTH,
    MIN_STREAM_ID_LENGTH,
    Decision,
    PlanOutcome,
)
from guard.events import STREAM_ID_PATTERN
from guard.policy import MAX_RULES

# The schema itself (application/problem+json, `Problem`) is added to every error response
# by kernel.openapi.problem_responses.
PROBLEM = OpenApiResponse(description="RFC 9457 problem+json with a stable `code`")


# The event batch, for the schema only: guard.events validates it, with the same limits.
# Field names are the wire's (camelCase).
class RuleRefSerializer(serializers.Serializer):
    index = serializers.IntegerField(
        allow_null=True,
        min_value=0,
        max_value=MAX_RULES - 1,
        help_text="index into the policy's `rules`, from 0; null: the policy default",
    )
    description = serializers.CharField(max_length=MAX_EVENT_RULE_DESCRIPTION_LENGTH)


class GuardDecisionSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    tool = serializers.CharField(max_length=MAX_EVENT_TOOL_LENGTH)
    decision = serializers.ChoiceField(choices=[code.value for code in Decision])
    step = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        help_text="index into the plan's `steps`, from 0 (texts for people count from 1)",
    )
    reason = serializers.CharField(required=False, max_length=MAX_EVENT_REASON_LENGTH)
    rule = RuleRefSerializer(
        required=False,
        allow_null=True,
        help_text="the policy rule that decided; left out when the policy was not consulted",
    )
    policyVersion = serializers.IntegerField(
        required=False, min_value=1, help_text="the policy version the token in force carried"
    )
    argsDigest = serializers.CharField(required=False)
    args = serializers.DictField(required=False)


class DisplayUpdateSerializer(serializers.Serializer):
    at = serializers.DateTimeField(required=False)
    message = serializers.DictField()


class PlanEndSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(
        choices=[outcome.value for outcome in PlanOutcome],
        help_text="completed: every required step ran; ended: before that; token_refused:"
        " the guard refused the token it was given",
    )
    reason = serializers.CharField(required=False, max_length=MAX_END_REASON_LENGTH)


class EventBatchSerializer(serializers.Serializer):
    stream = serializers.RegexField(
        STREAM_ID_PATTERN,
        required=False,
        min_length=MIN_STREAM_ID_LENGTH,
        max_length=MAX_STREAM_ID_LENGTH,
        help_text="the reporter's random stream id; with `seq`, a batch is stored once",
    )
    seq = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_BATCH_SEQUENCE,
        help_text="the batch's number in its stream for this plan: 1, 2, 3...",
    )
    lost = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_LOST_PER_BATCH,
        help_text="decisions of this plan the guard could not deliver since its last batch",
    )
    events = serializers.ListField(
        child=GuardDecisionSerializer(), required=False, max_length=MAX_EVENTS_PER_BATCH
    )
    displayUpdates = serializers.ListField(
        child=DisplayUpdateSerializer(), required=False, max_length=MAX_DISPLAY_UPDATES_PER_BATCH
    )
    end = PlanEndSerializer(required=False, help_text="the agent ended the plan")


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
