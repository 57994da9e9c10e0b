"""The admin API's bodies, each declared once: a request serializer validates and documents
what a call may send (unknown keys refused, plans.serializers.RequestBodySerializer), a
response serializer writes and documents what it answers."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from guard.policy import policy_json_schema
from plans.models import Plan
from plans.serializers import (
    GuardDocumentField,
    PlanDocumentField,
    RequestBodySerializer,
    StrictCharField,
    StrictIntegerField,
    UtcDateTimeField,
    openapi_30_schema,
)

#: a page of a list: at most this many rows (``limit``), 100 when not asked
PAGE_DEFAULT = 100
PAGE_MAX = 500
#: a name of a role, a group, an agent or a token
NAME_MAX = 200
ROLE_OR_GROUP_NAME_MAX = 64


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean, and nothing DRF would coerce into one ("true", 1)."""

    default_error_messages = {"invalid": "expected true or false"}

    def to_internal_value(self, data: object) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


@extend_schema_field(cast(dict[str, Any], openapi_30_schema(policy_json_schema())))
class PolicyDocumentField(GuardDocumentField):
    """A policy document: guard.policy validates it (``invalid_policy``)."""


# --- queries -------------------------------------------------------------------------------


class PageQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(
        required=False,
        default=PAGE_DEFAULT,
        min_value=1,
        max_value=PAGE_MAX,
        help_text=f"rows per page, 1 to {PAGE_MAX} (default {PAGE_DEFAULT})",
    )
    offset = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=2**31, help_text="rows to skip"
    )


class MemberQuerySerializer(PageQuerySerializer):
    email = serializers.CharField(
        required=False, max_length=254, help_text="only the member with this e-mail"
    )
    active = serializers.BooleanField(required=False, allow_null=True, default=None)


class PlanQuerySerializer(PageQuerySerializer):
    status = serializers.ChoiceField(required=False, choices=Plan.Status.choices)
    agent = serializers.CharField(required=False, max_length=26, help_text="an agent id")
    user = serializers.CharField(required=False, max_length=254, help_text="a member's e-mail")


# --- members, roles, groups ---------------------------------------------------------------


class MemberCreateSerializer(RequestBodySerializer):
    email = serializers.EmailField(max_length=254)
    name = StrictCharField(required=False, max_length=NAME_MAX, allow_blank=True)
    role = StrictCharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=ROLE_OR_GROUP_NAME_MAX,
        help_text="a role name; one the team lacks is created; null or empty: none",
    )
    groups = serializers.ListField(
        child=StrictCharField(max_length=ROLE_OR_GROUP_NAME_MAX),
        required=False,
        max_length=100,
        help_text="group names; ones the team lacks are created",
    )
    active = StrictBooleanField(required=False)


class MemberUpdateSerializer(MemberCreateSerializer):
    email = serializers.EmailField(max_length=254, required=False)


class MemberSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    role = serializers.CharField(source="role.name", allow_null=True, default=None)
    groups = serializers.SerializerMethodField()
    active = serializers.BooleanField(source="is_active")
    createdAt = UtcDateTimeField(source="created_at")

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_groups(self, member: Any) -> list[str]:
        return sorted(group.name for group in member.groups.all())


class NamedRowCreateSerializer(RequestBodySerializer):
    name = StrictCharField(max_length=ROLE_OR_GROUP_NAME_MAX)
    description = StrictCharField(required=False, max_length=200, allow_blank=True)


class NamedRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)


# --- agents and API keys ------------------------------------------------------------------


class AgentCreateSerializer(RequestBodySerializer):
    name = StrictCharField(max_length=NAME_MAX)
    policy = StrictCharField(max_length=64, help_text="the slug of the team's policy it follows")
    active = StrictBooleanField(required=False)
    acceptsDelegations = StrictBooleanField(required=False)


class AgentUpdateSerializer(AgentCreateSerializer):
    name = StrictCharField(max_length=NAME_MAX, required=False)
    policy = StrictCharField(max_length=64, required=False)


class AgentSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    policy = serializers.CharField(source="policy.slug")
    active = serializers.BooleanField(source="is_active")
    acceptsDelegations = serializers.BooleanField(source="accepts_delegations")
    createdAt = UtcDateTimeField(source="created_at")


class ApiKeyCreateSerializer(RequestBodySerializer):
    name = StrictCharField(required=False, max_length=NAME_MAX, allow_blank=True)
    expiresAt = serializers.DateTimeField(
        required=False, allow_null=True, help_text="RFC 3339; null or absent: never"
    )


class ApiKeySerializer(serializers.Serializer):
    prefix = serializers.CharField(help_text="the key's visible start, which names it")
    name = serializers.CharField(allow_blank=True)
    createdAt = UtcDateTimeField(source="created_at")
    expiresAt = UtcDateTimeField(source="expires_at", allow_null=True)
    revokedAt = UtcDateTimeField(source="revoked_at", allow_null=True)
    lastUsedAt = UtcDateTimeField(source="last_used_at", allow_null=True)


class ApiKeyCreatedSerializer(ApiKeySerializer):
    key = serializers.CharField(help_text="the key itself: shown this once, never again")


# --- policies -----------------------------------------------------------------------------


class PolicyVersionSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    hash = serializers.CharField()
    document = serializers.JSONField()
    comment = serializers.CharField(allow_blank=True)
    createdBy = serializers.CharField(source="created_by", allow_blank=True)
    createdAt = UtcDateTimeField(source="created_at")
    shadow = serializers.BooleanField()


class PolicySerializer(serializers.Serializer):
    slug = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    active = PolicyVersionSerializer(allow_null=True, help_text="null: nothing published yet")
    shadow = PolicyVersionSerializer(allow_null=True, help_text="the version tried in shadow")


class PolicyPublishSerializer(RequestBodySerializer):
    document = PolicyDocumentField(help_text="the policy document")
    comment = StrictCharField(required=False, max_length=1000, allow_blank=True)
    expectedBase = StrictIntegerField(
        allow_null=True,
        min_value=1,
        help_text="the version number the change was made from (null: the policy is new). "
        "A version published since is refused as `published_meanwhile` (409).",
    )


class PolicyPublishedSerializer(serializers.Serializer):
    published = serializers.BooleanField(
        help_text="false: the document is the active version's, and nothing was published"
    )
    version = PolicyVersionSerializer()


class PolicyPreviewSerializer(RequestBodySerializer):
    document = PolicyDocumentField(help_text="the policy document to preview")
    limit = StrictIntegerField(required=False, min_value=0, max_value=1000)


class CallSerializer(RequestBodySerializer):
    tool = StrictCharField(max_length=64)
    args = serializers.DictField(required=False, default=dict)


class PolicySimulateSerializer(RequestBodySerializer):
    document = PolicyDocumentField(
        required=False, help_text="a draft to simulate; absent: a published version"
    )
    version = StrictIntegerField(
        required=False, min_value=1, help_text="the published version; default the active one"
    )
    user = serializers.EmailField(max_length=254, help_text="the member the plan is for")
    plan = PlanDocumentField(help_text="the plan document")
    call = CallSerializer(required=False, help_text="a first call under the plan to decide")


# --- plans and approvals ------------------------------------------------------------------


class PlanRevokeSerializer(RequestBodySerializer):
    reason = StrictCharField(required=False, max_length=500, allow_blank=True)


class PlanRevokedSerializer(serializers.Serializer):
    id = serializers.CharField()
    revoked = serializers.BooleanField(help_text="false: it already was revoked")
    status = serializers.CharField()


class PlanSummarySerializer(serializers.Serializer):
    id = serializers.CharField()
    status = serializers.CharField()
    goal = serializers.CharField()
    user = serializers.CharField(source="member.email")
    agent = serializers.CharField(source="agent_id")
    createdAt = UtcDateTimeField(source="created_at")
    expiresAt = UtcDateTimeField(source="expires_at")


class ApprovalDecideSerializer(RequestBodySerializer):
    decision = serializers.ChoiceField(choices=["approve", "deny"])
    reason = StrictCharField(
        required=False, max_length=500, allow_blank=True, help_text="required to deny"
    )


class ApprovalDecidedSerializer(serializers.Serializer):
    plan = serializers.CharField()
    approved = serializers.BooleanField()
    by = serializers.CharField()
    at = UtcDateTimeField()
