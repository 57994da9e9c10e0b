"""``GET /v1/audit/records``: a team's sealed audit records, in chain order, for auditors'
tools (a SIEM polls it with an audit token, ``Authorization: Bearer pga_...``).

Paging is by ``seq``: ``after`` is the last ``seq`` the client holds and ``next`` the one to
send next time. Only sealed records are served, and the sealer makes a team's records
visible in ``seq`` order, all of a batch at once, so a client that always sends back
``next`` never misses nor repeats a record, however many are being written meanwhile; with
nothing new, ``next`` stays where it was.

The response's shape is declared once, by the serializers below, which both write it and
document it; the hashed part of each record comes from ``audit.chain.record_document``.
``redacted`` (AuditRecord.is_redacted) is outside the hash: it says that retention emptied
the record, whose hash a client then cannot recompute.

``format=ocsf`` answers the same page with each record as its OCSF event (audit.ocsf, the
one home of the mapping); ``next`` and the paging are the same.
"""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from guard.errors import FieldError
from kernel.bearer import BearerAuthentication, CredentialRateThrottle
from kernel.problems import Code, DomainError

from .chain import record_document
from .models import AuditRecord, AuditToken
from .ocsf import OCSF_VERSION, ocsf_event
from .selectors import records_after
from .tokens import audit_token_authenticate, audit_token_touch

PAGE_DEFAULT = 100
PAGE_MAX = 1000
#: PostgreSQL's bigint: a larger cursor could only be a mistake, answered 400, not a 500
CURSOR_MAX = 2**63 - 1


def request_audit_token(request: Request) -> AuditToken:
    """The token a view authenticated by AuditTokenAuthentication was called with."""
    return cast(AuditToken, request.auth)


class AuditTokenAuthentication(BearerAuthentication):
    """``Authorization: Bearer pga_...``. ``request.user`` and ``request.auth`` are the
    AuditToken. Failed attempts count against the client address's budget of failed
    authentications (kernel.bearer), the one API keys count against too."""

    def credential_authenticate(self, credential: str) -> tuple[AuditToken, AuditToken]:
        token = audit_token_authenticate(credential)
        return token, token

    def malformed(self) -> Exception:
        return DomainError(Code.INVALID_AUDIT_TOKEN, "Use `Authorization: Bearer <audit token>`.")

    def missing(self, request: Request) -> tuple[AuditToken, AuditToken]:
        raise self.malformed()


class AuditTokenAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = AuditTokenAuthentication
    name = "auditTokenAuth"

    def get_security_definition(self, auto_schema) -> dict:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A team's read-only audit token: `Authorization: Bearer pga_...`. "
            "A superuser creates it (`manage.py create_audit_token --team SLUG` or the admin).",
        }


class AuditTokenRateThrottle(CredentialRateThrottle):
    """PLANGATE_RATE_LIMIT requests per audit token per window, as for an API key."""

    scope = "audit_token"
    credential_type = AuditToken


class AuditRecordQuerySerializer(serializers.Serializer):
    after = serializers.IntegerField(
        required=False,
        default=0,
        min_value=0,
        max_value=CURSOR_MAX,
        help_text="The `next` of the previous page (a `seq`); 0 or absent: from the start.",
    )
    limit = serializers.IntegerField(
        required=False,
        default=PAGE_DEFAULT,
        min_value=1,
        max_value=PAGE_MAX,
        help_text=f"Records per page, 1 to {PAGE_MAX} (default {PAGE_DEFAULT}).",
    )
    format = serializers.ChoiceField(
        choices=["plangate", "ocsf"],
        required=False,
        default="plangate",
        help_text="`plangate` (default): the records as chained; `ocsf`: each record as its "
        f"OCSF {OCSF_VERSION} event (API Activity, Account Change or Entity Management).",
    )


class AuditAgentSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="the agent id (ULID)")
    name = serializers.CharField(allow_blank=True)


class AuditPolicySerializer(serializers.Serializer):
    id = serializers.CharField(allow_blank=True, help_text="the policy's slug")
    version = serializers.IntegerField(allow_null=True)


class AuditRecordSerializer(serializers.Serializer):
    seq = serializers.IntegerField(help_text="Position in the team's chain, from 1; the cursor.")
    format = serializers.IntegerField(
        help_text="the version of the hashed document's format: 1 for records written before "
        "it was kept (their hash does not cover `format`), 2 and later (it does)"
    )
    id = serializers.IntegerField()
    at = serializers.CharField(help_text="ISO 8601, UTC, microseconds: 2026-12-01T09:13:04.120553Z")
    kind = serializers.ChoiceField(choices=AuditRecord.Kind.choices)
    team = serializers.CharField(help_text="the team's slug")
    teamId = serializers.IntegerField(help_text="the team's id, which the hash covers")
    actor = serializers.CharField(
        allow_blank=True,
        help_text="who acted: a person's username, `manage.py <command>`, `agent:<id>`...",
    )
    agent = AuditAgentSerializer(allow_null=True)
    user = serializers.CharField(
        allow_blank=True, help_text="the member's e-mail, or the user as a refused plan gave it"
    )
    planId = serializers.CharField(allow_blank=True)
    planHash = serializers.CharField(allow_blank=True)
    policy = AuditPolicySerializer(allow_null=True)
    code = serializers.CharField(allow_blank=True, help_text="refusal code or decision")
    rule = serializers.JSONField(
        allow_null=True, help_text='the policy rule that decided: {"index": n, "description": ...}'
    )
    details = serializers.JSONField(help_text="what else the record says, by kind")
    prevHash = serializers.CharField(
        allow_blank=True, help_text="`hash` of the record before (empty for seq 1)"
    )
    hash = serializers.CharField(
        help_text="lowercase hex SHA-256 of the RFC 8785 JSON of this record without `id`, "
        "`team`, `hash` and `redacted` (and `format` when it is 1)"
    )
    redacted = serializers.BooleanField(
        help_text="true: the team's retention period removed this record's content (a guard "
        "decision or a refused attempt). It keeps its place in the chain (`seq`, `kind`, "
        "`at`, `prevHash`, `hash`); every other field is empty, so its `hash` cannot be "
        "recomputed. The team's `change` record with `details.object` `retention` counts it."
    )


class AuditRecordPageSerializer(serializers.Serializer):
    records = AuditRecordSerializer(many=True)
    next = serializers.IntegerField(
        help_text="Send as `after` next time; unchanged when there was nothing new."
    )


class OcsfEventSerializer(serializers.Serializer):
    """An OCSF event: the attributes every event of the trail carries; the rest follow its
    class in the OCSF schema."""

    class_uid = serializers.IntegerField(help_text="6003, 3001 or 3004")
    category_uid = serializers.IntegerField()
    activity_id = serializers.IntegerField()
    type_uid = serializers.IntegerField()
    severity_id = serializers.IntegerField()
    time = serializers.IntegerField(help_text="milliseconds since the epoch")
    metadata = serializers.JSONField(
        help_text="`version`, `product`, `uid` (`<team>:<seq>`), `sequence` (the record's seq)"
    )
    unmapped = serializers.JSONField(help_text="`plangate`: kind, seq, hash, prevHash, ...")


class AuditRecordsPageSerializer(serializers.Serializer):
    """What the endpoint answers, in either format (the schema's description of it)."""

    records = PolymorphicProxySerializer(
        component_name="AuditRecordInEitherFormat",
        serializers=[AuditRecordSerializer, OcsfEventSerializer],
        resource_type_field_name=None,
        many=True,
    )
    next = serializers.IntegerField(
        help_text="Send as `after` next time; unchanged when there was nothing new."
    )


def record_api_document(record: AuditRecord, team_slug: str) -> dict[str, Any]:
    """What AuditRecordSerializer writes for ``record``: the hashed document, plus ``id``,
    the team's slug, the hash and whether retention emptied it."""
    return {
        **record_document(record),
        "format": record.format,
        "id": record.pk,
        "team": team_slug,
        "hash": record.hash,
        "redacted": record.is_redacted(),
    }


def _query(request: Request) -> dict[str, Any]:
    unknown = sorted(set(request.query_params) - {"after", "limit", "format"})
    if unknown:
        raise DomainError(
            Code.INVALID_REQUEST,
            "Unknown query parameter.",
            errors=[FieldError(name, "unknown parameter") for name in unknown],
        )
    query = AuditRecordQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


class _NoFormatOverride:
    URL_FORMAT_OVERRIDE = None


class RecordsNegotiation(DefaultContentNegotiation):
    """DRF's negotiation without its ``?format=`` renderer override: ``format`` is this
    endpoint's own parameter (``plangate`` or ``ocsf``), and the answer is JSON either way."""

    settings = _NoFormatOverride  # type: ignore[assignment]


class AuditRecordListView(APIView):
    content_negotiation_class = RecordsNegotiation
    authentication_classes = [AuditTokenAuthentication]
    permission_classes = [IsAuthenticated]
    throttle_classes = [AuditTokenRateThrottle]

    @extend_schema(
        operation_id="audit_records_list",
        summary="The token's team's sealed audit records, in chain order, after a cursor",
        tags=["audit"],
        parameters=[AuditRecordQuerySerializer],
        responses={
            200: AuditRecordsPageSerializer,
            400: OpenApiResponse(description="A bad `after` or `limit` (`invalid_request`)."),
            401: OpenApiResponse(
                description="The audit token is missing, unknown or revoked "
                "(`invalid_audit_token`)."
            ),
            429: OpenApiResponse(
                description="Rate limit of the token, or of failed authentications from this "
                "address, reached (`throttled`); see Retry-After."
            ),
        },
    )
    def get(self, request: Request) -> Response:
        token = request_audit_token(request)
        query = _query(request)
        records = records_after(team=token.team, after=query["after"], limit=query["limit"])
        next_seq = records[-1].seq if records else query["after"]
        audit_token_touch(token=token)
        if query["format"] == "ocsf":
            # The events are written by audit.ocsf, which the tests validate against the
            # OCSF schema; the serializer documents the page, it does not rewrite them.
            events = [ocsf_event(record, token.team.slug) for record in records]
            return Response({"records": events, "next": next_seq})
        page = {
            "records": [record_api_document(record, token.team.slug) for record in records],
            "next": next_seq,
        }
        return Response(AuditRecordPageSerializer(page).data)
