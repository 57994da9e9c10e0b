"""The bodies of the plans API, each declared once: the same serializer validates a request
(or renders a response) and documents it in the OpenAPI schema.

Every request body is a RequestBodySerializer, validated by DRF's own ``is_valid``: one
mechanism for ``{plan, ttl}``, ``{token, ttl}``, ``{ttl}`` and the event batch. What a body
carries for the guard is the guard's: the plan document (``guard.plan``) and the event
batch (``guard.events``) are documented with the guard's JSON Schemas and validated by the
services, which answer ``invalid_plan`` or ``invalid_events`` with paths under the body.
Everything else about a body (its keys, their types, the ttl's bounds) is
``invalid_request``, through the problem handler's mapping of DRF's ValidationError.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from django.core.validators import RegexValidator
from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from guard.events import EVENT_BATCH_KEYS, event_batch_json_schema
from guard.plan import plan_json_schema
from guard.policy_evaluation import (
    POLICY_ARGUMENT_OVERLAPS,
    POLICY_ARGUMENT_UNDECIDABLE,
    POLICY_DENY_OVERLAPS,
    POLICY_DENY_UNDECIDABLE,
    UNPINNED_POLICY_ARGUMENT,
    StepWarning,
)
from guard.utc import isoformat_z

from .approvals import APPROVAL_UNAVAILABLE, ApprovalRequested, approval_queue_url
from .delegation import DelegatedToken
from .models import Plan, PlanToken
from .services import IssuedToken, token_ttl_bounds

REQUIRED = "this field is required"


# Keywords of JSON Schema 2020-12 that OpenAPI 3.0 does not have; the guard's validators
# enforce what they say, the descriptions tell people.
_NOT_IN_OPENAPI_30 = frozenset(
    {"$schema", "const", "propertyNames", "if", "then", "else", "dependentRequired"}
)

# 2020-12 writes an exclusive bound as a number; 3.0 as the bound plus a boolean flag.
_EXCLUSIVE_BOUNDS = {"exclusiveMinimum": "minimum", "exclusiveMaximum": "maximum"}


def openapi_30_schema(schema: object) -> object:
    """A JSON Schema 2020-12 document of the guard as an OpenAPI 3.0 schema object: `const`
    as a one-value `enum`, a `[type, "null"]` pair as `nullable`, a numeric
    `exclusiveMinimum` / `exclusiveMaximum` as 3.0's bound with its boolean flag, and none of
    the keywords 3.0 lacks."""
    if isinstance(schema, list):
        return [openapi_30_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted: dict[str, object] = {}
    for key, value in schema.items():
        if key in _NOT_IN_OPENAPI_30:
            continue
        if key == "properties":  # names of fields, not keywords
            converted[key] = {name: openapi_30_schema(field) for name, field in value.items()}
        elif key in _EXCLUSIVE_BOUNDS and not isinstance(value, bool):
            converted[_EXCLUSIVE_BOUNDS[key]] = value
            converted[key] = True
        elif key == "type" and isinstance(value, list):
            converted[key] = next(name for name in value if name != "null")
            if "null" in value:
                converted["nullable"] = True
        else:
            converted[key] = openapi_30_schema(value)
    if "const" in schema:
        converted["enum"] = [schema["const"]]
    return converted


# --- request fields -------------------------------------------------------------------------


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer, and nothing DRF would coerce into one ("900", 900.0, true)."""

    default_error_messages = {"invalid": "expected an integer", "required": REQUIRED}

    def to_internal_value(self, data: object) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return data


class StrictCharField(serializers.CharField):
    """A JSON string, kept exactly as sent: not a number turned into text, not trimmed."""

    default_error_messages = {"invalid": "expected a string", "required": REQUIRED}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return data


class TtlField(StrictIntegerField):
    """A token's lifetime in seconds, within plans.services.token_ttl_bounds: settings,
    read when a body is validated and when the schema is generated (TtlFieldSchema), never
    when this module is imported. null or absent means PLANGATE_TOKEN_TTL."""

    default_error_messages = {"range": "must be between {low} and {high}"}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data: object) -> int:
        ttl = super().to_internal_value(data)
        low, high = token_ttl_bounds()
        if not low <= ttl <= high:
            self.fail("range", low=low, high=high)
        return ttl


class TtlFieldSchema(OpenApiSerializerFieldExtension):
    target_class = TtlField

    def map_serializer_field(self, auto_schema, direction) -> dict:
        low, high = token_ttl_bounds()
        return {
            "type": "integer",
            "minimum": low,
            "maximum": high,
            "description": "seconds; PLANGATE_TOKEN_TTL when left out",
        }


class GuardDocumentField(serializers.Field):
    """A document the guard validates (or a part of one), passed on as sent, null included,
    so that every fault in it is reported by the guard's validator, the same way."""

    default_error_messages = {"required": REQUIRED}

    def validate_empty_values(self, data: object) -> tuple[bool, object]:
        if data is None:
            return True, None
        return super().validate_empty_values(data)

    def to_internal_value(self, data: object) -> object:
        return data

    def to_representation(self, value: object) -> object:
        return value


# The plan schema is an object, so its conversion is one too.
@extend_schema_field(cast(dict[str, Any], openapi_30_schema(plan_json_schema())))
class PlanDocumentField(GuardDocumentField):
    """The plan document: guard.plan validates it (``invalid_plan``)."""


class RequestBodySerializer(serializers.Serializer):
    """A JSON object with exactly the declared keys. Unknown keys are refused rather than
    ignored: a misspelt field must never pass silently."""

    default_error_messages = {"invalid": "expected an object", "null": "expected an object"}

    def to_internal_value(self, data: object) -> dict[str, Any]:
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, Mapping) else []
        errors: dict[str, Any] = {}
        value: dict[str, Any] = {}
        try:
            value = super().to_internal_value(data)
        except ValidationError as exc:
            if not isinstance(exc.detail, dict):
                raise
            errors.update(exc.detail)
        errors.update({key: ["unknown field"] for key in unknown})
        if errors:
            raise ValidationError(errors)
        return value

    @classmethod
    def validated(cls, data: object) -> dict[str, Any]:
        """The valid body, or ValidationError (``invalid_request`` naming each bad path)."""
        serializer = cls(data=data)
        serializer.is_valid(raise_exception=True)
        return cast(dict[str, Any], serializer.validated_data)


class RequestBodySchema(OpenApiSerializerExtension):
    """The schema says what RequestBodySerializer enforces: no other keys."""

    target_class = RequestBodySerializer
    match_subclasses = True

    def map_serializer(self, auto_schema, direction) -> dict:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        return {**schema, "additionalProperties": False}


class PlanDeclarationSerializer(RequestBodySerializer):
    """A plan to declare, and the lifetime wanted for its token."""

    plan = PlanDocumentField(help_text="the plan document, version 1 or 2")
    ttl = TtlField()


class PlanRefreshSerializer(RequestBodySerializer):
    """The plan's last token, to be signed again with the current policy."""

    token = StrictCharField(
        allow_blank=True,  # an empty token is not a malformed body but an invalid token
        help_text="the plan's last token, may be expired",
    )
    ttl = TtlField()


class PlanDelegationSerializer(RequestBodySerializer):
    """A child plan to sign from the plan in the path, for the caller or another agent."""

    plan = PlanDocumentField(
        help_text="the child plan, version 1 or 2: each step inside a step of the parent,"
        " for the parent's user"
    )
    agent = StrictCharField(
        required=False,
        max_length=26,
        help_text="the agent that receives the child plan: the caller when left out, or an"
        " active agent of its team that accepts delegations",
    )
    jkt = StrictCharField(
        required=False,
        validators=[
            RegexValidator(
                r"\A[A-Za-z0-9_-]{43}\Z",
                message="must be an RFC 7638 thumbprint: 43 base64url characters",
            )
        ],
        help_text="the RFC 7638 thumbprint of the receiving guard's key: the child's tokens"
        " are bound to it (`cnf.jkt`), and its refresh, feed and events then need a DPoP"
        " proof by that key. Required when the team binds every token.",
    )
    ttl = TtlField()


class PlanTokenRequestSerializer(RequestBodySerializer):
    """Nothing is needed: the plan is named by the path. A body may ask a lifetime."""

    ttl = TtlField()


class EventBatchSerializer(RequestBodySerializer):
    """A batch of guard decisions: the keys of ``guard.events``, whose validator
    (``invalid_events``) and JSON Schema (EventBatchSchema) say the rest."""

    def get_fields(self) -> dict[str, serializers.Field]:
        return {key: GuardDocumentField(required=False) for key in sorted(EVENT_BATCH_KEYS)}


class EventBatchSchema(OpenApiSerializerExtension):
    """The event batch as ``guard.events.event_batch_json_schema`` declares it."""

    target_class = EventBatchSerializer
    priority = 1  # before RequestBodySchema, which matches every body

    def get_name(self, auto_schema, direction) -> str:
        return "EventBatch"

    def map_serializer(self, auto_schema, direction) -> dict:
        return cast(dict[str, Any], openapi_30_schema(event_batch_json_schema()))


# --- response bodies --------------------------------------------------------------------------


class UtcDateTimeField(serializers.DateTimeField):
    """An instant as RFC 3339 in UTC with a ``Z``, whatever TIME_ZONE says."""

    def to_representation(self, value: datetime) -> str:
        return isoformat_z(value)


# Response serializers render from the objects named in their comments. Their docstrings
# are the schema's descriptions.


# From a PolicyVersion.
class PolicyRefSerializer(serializers.Serializer):
    """A version of a policy."""

    id = serializers.CharField(source="policy.slug", help_text="the policy's slug")
    version = serializers.IntegerField(source="number")
    hash = serializers.CharField()


# From a guard.policy_evaluation.StepWarning.
class IssuanceWarningSerializer(serializers.Serializer):
    """Something about an admitted plan that will not work as the developer may expect.
    The token is valid; the warning only says that the guard is going to block some calls."""

    path = serializers.SerializerMethodField(
        help_text="the step's argument, as `plan.steps[<n>].args.<name>`"
    )
    # Text, not an enum: a client must accept warning codes added later.
    code = serializers.CharField(
        help_text=(
            "why some calls of the step will be refused: "
            f"`{UNPINNED_POLICY_ARGUMENT}`: every policy rule admitting the step constrains"
            " the argument, which the step does not pin; "
            f"`{POLICY_ARGUMENT_OVERLAPS}`: the step pins values that the rules admitting"
            " it admit only in part; "
            f"`{POLICY_ARGUMENT_UNDECIDABLE}`: the step pins values of which that cannot be"
            " decided (patterns compared with patterns); "
            f"`{POLICY_DENY_OVERLAPS}`: a deny rule refuses the calls whose arguments it"
            " matches (a missing argument included), and the step lets some through; "
            f"`{POLICY_DENY_UNDECIDABLE}`: whether a deny rule refuses some of the step's"
            " calls cannot be decided"
        ),
    )
    detail = serializers.CharField(help_text="which rules, which arguments, and how to fix it")
    rule = serializers.IntegerField(
        help_text="the first policy rule concerned (for a deny rule's warning, that rule), as"
        " its index in the policy's `rules`"
    )

    def get_path(self, warning: StepWarning) -> str:
        return f"plan.{warning.path}"


# From a plans.services.IssuedToken.
class IntentTokenSerializer(serializers.Serializer):
    """An intent token, and the plan and policy version it was signed for."""

    id = serializers.CharField(source="plan.id", help_text="the plan id (ULID), the token's jti")
    token = serializers.CharField(
        help_text="compact JWS, Ed25519 signed; header `alg` `EdDSA` or `Ed25519` (RFC 9864)"
    )
    planHash = serializers.CharField(source="plan.hash")
    expiresAt = UtcDateTimeField(source="expires_at")
    policy = PolicyRefSerializer(source="policy_version")
    reportArguments = serializers.BooleanField(
        source="plan.team.log_call_arguments",
        help_text="whether the guard should report call arguments, not only their digest",
    )
    warnings = IssuanceWarningSerializer(
        many=True,
        help_text=(
            "step arguments for which the policy will refuse some calls: left free by the"
            " step, or pinned to values the policy admits only in part (empty when there is"
            " none)"
        ),
    )


def intent_token_body(issued: IssuedToken) -> dict[str, Any]:
    """What ``IntentTokenSerializer(issued).data`` answers, built directly: the body of every
    signed token (201, refresh, approved token). The serializer declares and documents the
    body; DRF binds a deep copy of every field for each response, which cost a tenth of an
    issuance, so the hot path builds the same dict (tests/plans/test_token_body.py holds it
    to the serializer's answer, key for key and in order)."""
    version = issued.policy_version
    return {
        "id": issued.plan.id,
        "token": issued.token,
        "planHash": issued.plan.hash,
        "expiresAt": UtcDateTimeField().to_representation(issued.expires_at),
        "policy": {"id": version.policy.slug, "version": version.number, "hash": version.hash},
        "reportArguments": bool(issued.plan.team.log_call_arguments),
        "warnings": [
            {
                "path": f"plan.{warning.path}",
                "code": warning.code,
                "detail": warning.detail,
                "rule": warning.rule,
            }
            for warning in issued.warnings
        ],
    }


class ParentRefSerializer(serializers.Serializer):
    """The plan a child plan was delegated from."""

    id = serializers.CharField(help_text="the parent plan's id (the child token's parent.jti)")
    planHash = serializers.CharField(
        source="hash", help_text="its plan hash (the child token's parent.ph)"
    )


# From a Plan.reserved.
class ReservationSerializer(serializers.Serializer):
    """What the child plan took from its parent at delegation, never given back."""

    calls = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="parent step index (as text) -> calls reserved from its maxCalls",
    )
    budgets = serializers.DictField(
        child=serializers.CharField(),
        help_text="parent budget id -> amount reserved from its max, as an exact decimal",
    )
    steps = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="child step index (as text) -> the parent step it reserved from",
    )


# From a plans.delegation.DelegatedToken.
class DelegatedTokenSerializer(IntentTokenSerializer):
    """A child plan's first token: the issuance answer, its parent and its reservation."""

    id = serializers.CharField(source="issued.plan.id", help_text="the child plan's id")
    token = serializers.CharField(source="issued.token", help_text="compact JWS")
    planHash = serializers.CharField(source="issued.plan.hash")
    expiresAt = UtcDateTimeField(source="issued.expires_at")
    policy = PolicyRefSerializer(source="issued.policy_version")
    reportArguments = serializers.BooleanField(source="issued.plan.team.log_call_arguments")
    warnings = IssuanceWarningSerializer(many=True, source="issued.warnings")
    parent = ParentRefSerializer(help_text="the plan it was delegated from")
    agent = serializers.CharField(
        source="issued.plan.agent_id", help_text="the agent that receives it"
    )
    reserved = ReservationSerializer()


def delegated_token_body(delegated: DelegatedToken) -> dict[str, Any]:
    """What DelegatedTokenSerializer declares: the issuance body, the parent, the
    receiving agent and the reservation."""
    return {
        **intent_token_body(delegated.issued),
        "parent": {"id": delegated.parent.id, "planHash": delegated.parent.hash},
        "agent": delegated.issued.plan.agent_id,
        "reserved": delegated.reserved,
    }


class ReviewRuleSerializer(serializers.Serializer):
    """The policy rule that asked for review."""

    index = serializers.IntegerField(help_text="its index in the policy's `rules`, from 0")
    description = serializers.CharField()


class ReviewStepSerializer(serializers.Serializer):
    """A plan step that a policy's review rule sends to a person."""

    path = serializers.CharField(help_text="the step, as `plan.steps[<n>]`")
    step = serializers.IntegerField(help_text="the step's index, from 0 (`stepIndex`'s older name)")
    stepIndex = serializers.IntegerField(source="step", help_text="the step's index, from 0")
    stepNumber = serializers.SerializerMethodField(
        help_text="the step as people count it, from 1 (the admin, exports, guard messages)"
    )
    tool = serializers.CharField()
    rule = ReviewRuleSerializer()

    def get_stepNumber(self, entry: Mapping[str, Any]) -> int:
        return int(entry["step"]) + 1


@extend_schema_field({"type": "string", "pattern": f"^{Plan.Status.PENDING_APPROVAL.value}$"})
class PendingStatusField(serializers.CharField):
    """The status of a plan just sent for approval: always ``pending_approval`` (a pattern,
    not an enum, so the plan statuses' own schema component keeps its name)."""


class ApprovalWarningSerializer(serializers.Serializer):
    """Something the requester of an approval should know: the plan still waits."""

    path = serializers.CharField(help_text="`plan`: the warning is about the whole plan")
    # Text, not an enum: a client must accept warning codes added later.
    code = serializers.CharField(
        help_text=(
            f"`{APPROVAL_UNAVAILABLE}`: nobody can approve the plan now (the team has no"
            " approver but the plan's own member, and no superuser can decide); superusers"
            " were told"
        )
    )
    detail = serializers.CharField(help_text="who is missing and what an admin can do")


# From a plans.approvals.ApprovalRequested.
class ApprovalRequestedSerializer(serializers.Serializer):
    """A plan that waits for a person's approval: nothing is signed yet. Ask
    `POST /v1/plans/{id}/token` (the `Location`) for its token."""

    id = serializers.CharField(source="plan.id", help_text="the plan id (ULID)")
    status = PendingStatusField(source="plan.status")
    planHash = serializers.CharField(source="plan.hash")
    review = ReviewStepSerializer(many=True, help_text="the steps and rules that asked for review")
    expiresAt = UtcDateTimeField(
        source="deadline", help_text="when the request expires if nobody decides"
    )
    warnings = serializers.SerializerMethodField(
        help_text="what may keep the plan from being decided (empty when there is none)"
    )
    approvalUrl = serializers.SerializerMethodField(
        help_text="where a person approves or denies the plan: its page in the approval queue"
    )

    @extend_schema_field(ApprovalWarningSerializer(many=True))
    def get_warnings(self, requested: ApprovalRequested) -> list[dict[str, str]]:
        if not requested.unavailable:
            return []
        return [{"path": "plan", "code": APPROVAL_UNAVAILABLE, "detail": requested.unavailable}]

    def get_approvalUrl(self, requested: ApprovalRequested) -> str:
        return approval_queue_url(requested.plan)


class TokenHistorySerializer(serializers.ListSerializer):
    """A plan's tokens in the order they were signed, with their policy versions in one query."""

    def get_attribute(self, instance: Plan) -> object:
        return instance.tokens.select_related("policy_version").order_by("issued_at", "id")


# From a PlanToken.
class PlanTokenRecordSerializer(serializers.Serializer):
    """A token signed for the plan: what it carried, never the token itself."""

    kind = serializers.ChoiceField(choices=PlanToken.Kind.choices)
    kid = serializers.CharField()
    issuedAt = UtcDateTimeField(source="issued_at")
    expiresAt = UtcDateTimeField(source="expires_at")
    policyVersion = serializers.IntegerField(source="policy_version.number")
    role = serializers.CharField(allow_null=True)
    groups = serializers.ListField(child=serializers.CharField())

    class Meta:
        list_serializer_class = TokenHistorySerializer


class BlankAsNullCharField(serializers.CharField):
    """Text that is null on the wire when the model keeps it blank."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def get_attribute(self, instance: object) -> str | None:
        return super().get_attribute(instance) or None


# From a Plan.
class PlanApprovalSerializer(serializers.Serializer):
    """Where a person's approval of the plan stands (null when none was needed)."""

    state = serializers.ChoiceField(
        source="approval",
        choices=[choice for choice in Plan.Approval.values if choice],
        help_text="pending, approved, denied or expired",
    )
    review = ReviewStepSerializer(many=True)
    expiresAt = UtcDateTimeField(source="approval_deadline", allow_null=True)
    decidedBy = BlankAsNullCharField(source="approval_by", help_text="the approver's e-mail")
    decidedAt = UtcDateTimeField(source="approval_decided_at", allow_null=True)
    reason = BlankAsNullCharField(source="approval_reason")

    def to_representation(self, instance: Plan) -> Any:
        return super().to_representation(instance) if instance.approval else None


# From a Plan.
class PlanDetailSerializer(serializers.Serializer):
    """A plan the calling agent declared: its status, steps and token history."""

    id = serializers.CharField(help_text="the plan id (ULID)")
    status = serializers.ChoiceField(choices=Plan.Status.choices)
    goal = serializers.CharField()
    user = serializers.CharField(source="member.email", help_text="the member's stored e-mail")
    agent = serializers.CharField(source="agent_id")
    planHash = serializers.CharField(source="hash")
    createdAt = UtcDateTimeField(source="created_at")
    expiresAt = UtcDateTimeField(source="expires_at")
    revokedAt = UtcDateTimeField(source="revoked_at", allow_null=True)
    revokeReason = BlankAsNullCharField(
        source="revoke_reason", help_text="why an admin revoked the plan, if they said"
    )
    endedAt = UtcDateTimeField(source="ended_at", allow_null=True)
    endReason = BlankAsNullCharField(
        source="end_reason", help_text="why the plan ended, or why its guard refused its token"
    )
    role = serializers.CharField(allow_null=True)
    groups = serializers.ListField(child=serializers.CharField())
    policy = PolicyRefSerializer(source="policy_version")
    steps = serializers.ListField(child=serializers.DictField(), source="document.steps")
    tokens = PlanTokenRecordSerializer(many=True)
    approval = PlanApprovalSerializer(
        source="*", allow_null=True, help_text="null when no review rule asked for a person"
    )
    # DRF's metaclass takes declared fields off the class: Field.parent is not shadowed.
    parent = serializers.CharField(  # type: ignore[assignment]
        source="parent_id",
        allow_null=True,
        help_text="the plan it was delegated from (null for a plan its agent declared)",
    )
    reserved = serializers.SerializerMethodField(
        help_text="what it reserved of its parent (null without a parent)"
    )

    @extend_schema_field(ReservationSerializer(allow_null=True))
    def get_reserved(self, plan: Plan) -> dict[str, Any] | None:
        return plan.reserved if plan.parent_id is not None else None


class AgentSelfSerializer(serializers.Serializer):
    """The agent an API key belongs to, as that key's holder may see it."""

    id = serializers.CharField()
    name = serializers.CharField()
    team = serializers.CharField(source="team.slug", help_text="the team's slug")
    acceptsDelegations = serializers.BooleanField(
        source="accepts_delegations",
        help_text="whether other agents of the team may delegate child plans to it",
    )
