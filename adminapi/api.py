"""The admin API (``/v1/admin/...``): a team's members, roles, groups, agents and API keys,
policies and their versions, plans and approvals, for scripts and CI. Every call is a thin
door into the services the console and the management commands call (members.services,
policies.services, rehearsal, plans.services, plans.approvals): parse, call one service,
render. The token's team is the only team a call sees; another team's rows are not found.
Writes are recorded in the team's activity log as ``admin token pgadm_...``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.actors import acting_as
from guard.errors import FieldError
from kernel.problems import Code, DomainError
from members.models import Agent, ApiKey, Member
from members.services import (
    agent_create,
    agent_update,
    api_key_create,
    api_key_revoke,
    member_save,
    team_group_create,
    team_role_create,
)
from plans.api import PlainJsonNegotiation
from plans.api_schema import refusals
from plans.approvals import plan_approval_decide, plans_awaiting_approval
from plans.models import Plan
from plans.serializers import PlanDetailSerializer
from plans.services import plan_get_for_team, plan_revoke
from policies.models import Policy, PolicyVersion
from policies.selectors import policy_active_version, policy_shadow_version
from policies.services import policy_set
from rehearsal.impact import DEFAULT_LISTED, impact_report
from rehearsal.simulator import policy_draft, simulate_call, simulate_plan
from teams.models import Group, Role, Team

from .authentication import (
    AdminTokenAuthentication,
    AdminTokenRateThrottle,
    WritesNeedWriteScope,
    request_admin_token,
)
from .serializers import (
    AgentCreateSerializer,
    AgentSerializer,
    AgentUpdateSerializer,
    ApiKeyCreatedSerializer,
    ApiKeyCreateSerializer,
    ApiKeySerializer,
    ApprovalDecidedSerializer,
    ApprovalDecideSerializer,
    MemberCreateSerializer,
    MemberQuerySerializer,
    MemberSerializer,
    MemberUpdateSerializer,
    NamedRowCreateSerializer,
    NamedRowSerializer,
    PageQuerySerializer,
    PlanQuerySerializer,
    PlanRevokedSerializer,
    PlanRevokeSerializer,
    PlanSummarySerializer,
    PolicyPreviewSerializer,
    PolicyPublishedSerializer,
    PolicyPublishSerializer,
    PolicySerializer,
    PolicySimulateSerializer,
    PolicyVersionSerializer,
)
from .tokens import admin_token_actor, admin_token_touch

TAGS = ["admin"]
READS = refusals(400, 401, 404, 429)
WRITES = refusals(400, 401, 403, 404, 409, 429)


def _page_schema(item: Any, name: str) -> Any:
    """A page of ``item``s as the list endpoints answer it: the count and the rows."""
    return inline_serializer(
        name=name,
        fields={
            "count": serializers.IntegerField(help_text="rows in all"),
            "results": item(many=True),
        },
    )


class AdminAPIView(APIView):
    """An admin API endpoint: a team's admin token, its rate limit, writes in its name."""

    authentication_classes = [AdminTokenAuthentication]
    permission_classes = [IsAuthenticated, WritesNeedWriteScope]
    throttle_classes = [AdminTokenRateThrottle]
    content_negotiation_class = PlainJsonNegotiation
    #: False on POSTs that write nothing (previews, simulations): a read-only token may call
    writes: ClassVar[bool] = True

    def dispatch(self, request, *args, **kwargs):
        # The actor is asked only when a write records itself, after authentication.
        def actor() -> str:
            auth = getattr(getattr(self, "request", None), "auth", None)
            return admin_token_actor(auth) if auth is not None else ""

        with acting_as(actor):
            return super().dispatch(request, *args, **kwargs)

    def finalize_response(self, request: Request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if response.status_code < 400 and request.auth is not None:
            admin_token_touch(token=request_admin_token(request))
        return response

    def team(self) -> Team:
        return request_admin_token(self.request).team


def _query(serializer_class: type, request: Request) -> dict[str, Any]:
    query = serializer_class(data=request.query_params)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


def _page(rows: QuerySet, query: dict[str, Any], render: Callable[..., Any]) -> Response:
    offset, limit = query["offset"], query["limit"]
    return Response(
        {"count": rows.count(), "results": render(rows[offset : offset + limit], many=True).data}
    )


def _not_found(what: str, key: object) -> DomainError:
    return DomainError(Code.NOT_FOUND, f"No {what} {key!r} in this team.")


def _int_key(value: str) -> int | None:
    return int(value) if value.isdigit() and len(value) < 19 else None


# --- members ------------------------------------------------------------------------------


def _members(team: Team) -> QuerySet[Member]:
    return Member.objects.filter(team=team).select_related("role").prefetch_related("groups")


def _member(team: Team, member_id: str) -> Member:
    key = _int_key(member_id)
    member = _members(team).filter(pk=key).first() if key is not None else None
    if member is None:
        raise _not_found("member", member_id)
    return member


class MemberListView(AdminAPIView):
    @extend_schema(
        operation_id="admin_members_list",
        summary="The team's members",
        tags=TAGS,
        parameters=[MemberQuerySerializer],
        responses={200: _page_schema(MemberSerializer, "AdminMemberPage"), **READS},
    )
    def get(self, request: Request) -> Response:
        query = _query(MemberQuerySerializer, request)
        rows = _members(self.team()).order_by("email")
        if query.get("email"):
            rows = rows.filter(email__iexact=query["email"].strip())
        if query.get("active") is not None:
            rows = rows.filter(is_active=query["active"])
        return _page(rows, query, MemberSerializer)

    @extend_schema(
        operation_id="admin_members_create",
        summary="Add a member (their role and groups are created when the team lacks them)",
        tags=TAGS,
        request=MemberCreateSerializer,
        responses={201: MemberSerializer, **WRITES},
    )
    def post(self, request: Request) -> Response:
        body = MemberCreateSerializer.validated(request.data)
        member = member_save(
            team=self.team(),
            email=body["email"],
            name=body.get("name"),
            role=body["role"] or "" if "role" in body else None,
            groups=body.get("groups"),
            is_active=body.get("active"),
        )
        return Response(MemberSerializer(_member(self.team(), str(member.pk))).data, status=201)


class MemberDetailView(AdminAPIView):
    @extend_schema(
        operation_id="admin_members_read",
        summary="A member",
        tags=TAGS,
        responses={200: MemberSerializer, **READS},
    )
    def get(self, request: Request, member_id: str) -> Response:
        return Response(MemberSerializer(_member(self.team(), member_id)).data)

    @extend_schema(
        operation_id="admin_members_update",
        summary="Change a member: `active: false` disables them, and their running plans "
        "stop within the team's revocation bound",
        tags=TAGS,
        request=MemberUpdateSerializer,
        responses={200: MemberSerializer, **WRITES},
    )
    def patch(self, request: Request, member_id: str) -> Response:
        body = MemberUpdateSerializer.validated(request.data)
        member = _member(self.team(), member_id)
        member_save(
            team=self.team(),
            member=member,
            email=body.get("email", member.email),
            name=body.get("name"),
            role=body["role"] or "" if "role" in body else None,
            groups=body.get("groups"),
            is_active=body.get("active"),
        )
        return Response(MemberSerializer(_member(self.team(), member_id)).data)


# --- roles and groups ---------------------------------------------------------------------


class _NamedRowListView(AdminAPIView):
    model: ClassVar[type[Role] | type[Group]]

    def create(self, *, team: Team, name: str, description: str) -> Role | Group:
        raise NotImplementedError

    def get(self, request: Request) -> Response:
        query = _query(PageQuerySerializer, request)
        rows = self.model.objects.filter(team=self.team()).order_by("name")
        return _page(rows, query, NamedRowSerializer)

    def post(self, request: Request) -> Response:
        body = NamedRowCreateSerializer.validated(request.data)
        row = self.create(
            team=self.team(), name=body["name"], description=body.get("description", "")
        )
        return Response(NamedRowSerializer(row).data, status=201)


class RoleListView(_NamedRowListView):
    model = Role

    def create(self, *, team: Team, name: str, description: str) -> Role:
        return team_role_create(team=team, name=name, description=description)

    @extend_schema(
        operation_id="admin_roles_list",
        summary="The team's roles",
        tags=TAGS,
        parameters=[PageQuerySerializer],
        responses={200: _page_schema(NamedRowSerializer, "AdminRolePage"), **READS},
    )
    def get(self, request: Request) -> Response:
        return super().get(request)

    @extend_schema(
        operation_id="admin_roles_create",
        summary="Create a role",
        tags=TAGS,
        request=NamedRowCreateSerializer,
        responses={201: NamedRowSerializer, **WRITES},
    )
    def post(self, request: Request) -> Response:
        return super().post(request)


class GroupListView(_NamedRowListView):
    model = Group

    def create(self, *, team: Team, name: str, description: str) -> Group:
        return team_group_create(team=team, name=name, description=description)

    @extend_schema(
        operation_id="admin_groups_list",
        summary="The team's member groups",
        tags=TAGS,
        parameters=[PageQuerySerializer],
        responses={200: _page_schema(NamedRowSerializer, "AdminGroupPage"), **READS},
    )
    def get(self, request: Request) -> Response:
        return super().get(request)

    @extend_schema(
        operation_id="admin_groups_create",
        summary="Create a member group",
        tags=TAGS,
        request=NamedRowCreateSerializer,
        responses={201: NamedRowSerializer, **WRITES},
    )
    def post(self, request: Request) -> Response:
        return super().post(request)


# --- agents and their API keys ------------------------------------------------------------


def _agent(team: Team, agent_id: str) -> Agent:
    agent = (
        Agent.objects.filter(team=team, pk=agent_id.strip().upper()[:26])
        .select_related("policy")
        .first()
    )
    if agent is None:
        raise _not_found("agent", agent_id)
    return agent


def _policy_named(team: Team, slug: str, path: str) -> Policy:
    policy = Policy.objects.filter(team=team, slug=slug).first()
    if policy is None:
        raise DomainError(
            Code.INVALID_REQUEST,
            "No such policy.",
            errors=[FieldError(path, f"team {team.slug} has no policy {slug!r}")],
        )
    return policy


class AgentListView(AdminAPIView):
    @extend_schema(
        operation_id="admin_agents_list",
        summary="The team's agents",
        tags=TAGS,
        parameters=[PageQuerySerializer],
        responses={200: _page_schema(AgentSerializer, "AdminAgentPage"), **READS},
    )
    def get(self, request: Request) -> Response:
        query = _query(PageQuerySerializer, request)
        rows = (
            Agent.objects.filter(team=self.team()).select_related("policy").order_by("name", "id")
        )
        return _page(rows, query, AgentSerializer)

    @extend_schema(
        operation_id="admin_agents_create",
        summary="Create an agent following one of the team's policies",
        tags=TAGS,
        request=AgentCreateSerializer,
        responses={201: AgentSerializer, **WRITES},
    )
    def post(self, request: Request) -> Response:
        body = AgentCreateSerializer.validated(request.data)
        agent = agent_create(
            team=self.team(),
            name=body["name"],
            policy=_policy_named(self.team(), body["policy"], "policy"),
            is_active=body.get("active", True),
            accepts_delegations=body.get("acceptsDelegations", False),
        )
        return Response(AgentSerializer(agent).data, status=201)


class AgentDetailView(AdminAPIView):
    @extend_schema(
        operation_id="admin_agents_read",
        summary="An agent",
        tags=TAGS,
        responses={200: AgentSerializer, **READS},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        return Response(AgentSerializer(_agent(self.team(), agent_id)).data)

    @extend_schema(
        operation_id="admin_agents_update",
        summary="Change an agent: `active: false` disables it, and its running plans stop "
        "within the team's revocation bound",
        tags=TAGS,
        request=AgentUpdateSerializer,
        responses={200: AgentSerializer, **WRITES},
    )
    def patch(self, request: Request, agent_id: str) -> Response:
        body = AgentUpdateSerializer.validated(request.data)
        agent = _agent(self.team(), agent_id)
        agent = agent_update(
            agent=agent,
            name=body.get("name"),
            policy=_policy_named(self.team(), body["policy"], "policy")
            if "policy" in body
            else None,
            is_active=body.get("active"),
            accepts_delegations=body.get("acceptsDelegations"),
        )
        return Response(AgentSerializer(agent).data)


class ApiKeyListView(AdminAPIView):
    @extend_schema(
        operation_id="admin_api_keys_list",
        summary="An agent's API keys (never the keys themselves)",
        tags=TAGS,
        responses={200: ApiKeySerializer(many=True), **READS},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = _agent(self.team(), agent_id)
        rows = ApiKey.objects.filter(agent=agent).order_by("-created_at")
        return Response(ApiKeySerializer(rows, many=True).data)

    @extend_schema(
        operation_id="admin_api_keys_create",
        summary="Create an API key for the agent: the key is in this answer only",
        tags=TAGS,
        request=ApiKeyCreateSerializer,
        responses={201: ApiKeyCreatedSerializer, **WRITES},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        body = ApiKeyCreateSerializer.validated(request.data or {})
        agent = _agent(self.team(), agent_id)
        api_key, plaintext = api_key_create(
            agent=agent, name=body.get("name", ""), expires_at=body.get("expiresAt")
        )
        # The plaintext is in this answer only: never stored, never shown again.
        # ApiKeyCreatedSerializer documents it: ApiKeySerializer's fields and ``key``.
        return Response({**ApiKeySerializer(api_key).data, "key": plaintext}, status=201)


class ApiKeyRevokeView(AdminAPIView):
    @extend_schema(
        operation_id="admin_api_keys_revoke",
        summary="Revoke an API key, named by its prefix (`pg_<lookup id>`)",
        tags=TAGS,
        request=None,
        responses={200: ApiKeySerializer, **WRITES},
    )
    def post(self, request: Request, agent_id: str, prefix: str) -> Response:
        # Read even though unused: a body over the limit is refused like on every endpoint.
        request.data  # noqa: B018
        agent = _agent(self.team(), agent_id)
        api_key = ApiKey.objects.filter(agent=agent, lookup_id=prefix.removeprefix("pg_")).first()
        if api_key is None:
            raise _not_found("API key", prefix)
        return Response(ApiKeySerializer(api_key_revoke(api_key=api_key)).data)


# --- policies -----------------------------------------------------------------------------


def _policy(team: Team, slug: str) -> Policy:
    policy = Policy.objects.filter(team=team, slug=slug).first()
    if policy is None:
        raise _not_found("policy", slug)
    return policy


def _policy_body(policy: Policy) -> dict[str, Any]:
    return PolicySerializer(
        {
            "slug": policy.slug,
            "description": policy.description,
            "active": policy_active_version(policy=policy),
            "shadow": policy_shadow_version(policy=policy),
        }
    ).data


class PolicyListView(AdminAPIView):
    @extend_schema(
        operation_id="admin_policies_list",
        summary="The team's policies with their active and shadow versions",
        tags=TAGS,
        responses={200: PolicySerializer(many=True), **READS},
    )
    def get(self, request: Request) -> Response:
        policies = Policy.objects.filter(team=self.team()).order_by("slug")
        return Response([_policy_body(policy) for policy in policies])


class PolicyDetailView(AdminAPIView):
    @extend_schema(
        operation_id="admin_policies_read",
        summary="A policy with its active and shadow versions",
        tags=TAGS,
        responses={200: PolicySerializer, **READS},
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(_policy_body(_policy(self.team(), slug)))


class PolicyVersionListView(AdminAPIView):
    @extend_schema(
        operation_id="admin_policy_versions_list",
        summary="A policy's versions, newest first",
        tags=TAGS,
        parameters=[PageQuerySerializer],
        responses={200: _page_schema(PolicyVersionSerializer, "AdminPolicyVersionPage"), **READS},
    )
    def get(self, request: Request, slug: str) -> Response:
        query = _query(PageQuerySerializer, request)
        rows = PolicyVersion.objects.filter(policy=_policy(self.team(), slug)).order_by("-number")
        return _page(rows, query, PolicyVersionSerializer)

    @extend_schema(
        operation_id="admin_policy_versions_publish",
        summary="Publish a document as the policy's next version (the policy is created when "
        "new); `expectedBase` guards against a version published meanwhile",
        tags=TAGS,
        request=PolicyPublishSerializer,
        responses={
            201: PolicyPublishedSerializer,
            200: OpenApiResponse(
                PolicyPublishedSerializer,
                description="The document is the active version's: nothing was published.",
            ),
            **WRITES,
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        body = PolicyPublishSerializer.validated(request.data)
        team = self.team()
        policy = Policy.objects.filter(team=team, slug=slug).first()
        before = policy_active_version(policy=policy) if policy is not None else None
        if before is None and body["expectedBase"] is not None:
            raise DomainError(
                Code.PUBLISHED_MEANWHILE if policy is not None else Code.INVALID_REQUEST,
                "Nothing is published under that name.",
                errors=[FieldError("expectedBase", f"policy {slug!r} has no version yet")],
            )
        try:
            version = policy_set(
                team=team,
                slug=slug,
                document=body["document"],
                comment=body.get("comment", ""),
                created_by=admin_token_actor(request_admin_token(request)),
                expected_base=body["expectedBase"],
            )
        except DomainError as error:
            raise _renamed(error, {"expected_base": "expectedBase", "slug": "slug"}) from None
        published = before is None or version.pk != before.pk
        return Response(
            PolicyPublishedSerializer({"published": published, "version": version}).data,
            status=201 if published else 200,
        )


def _renamed(error: DomainError, paths: dict[str, str]) -> DomainError:
    """``error`` with a service's field names as this API's body names them."""
    error.errors = [
        FieldError(paths.get(item.path, item.path), item.detail) for item in error.errors
    ]
    return error


class PolicyVersionDetailView(AdminAPIView):
    @extend_schema(
        operation_id="admin_policy_versions_read",
        summary="One version of a policy",
        tags=TAGS,
        responses={200: PolicyVersionSerializer, **READS},
    )
    def get(self, request: Request, slug: str, number: int) -> Response:
        version = PolicyVersion.objects.filter(
            policy=_policy(self.team(), slug), number=number
        ).first()
        if version is None:
            raise _not_found(f"version of policy {slug}", number)
        return Response(PolicyVersionSerializer(version).data)


class PolicyPreviewView(AdminAPIView):
    writes = False

    @extend_schema(
        operation_id="admin_policies_preview",
        summary="What publishing a document would refuse among the team's live plans "
        "(writes nothing)",
        tags=TAGS,
        request=PolicyPreviewSerializer,
        responses={200: OpenApiResponse(description="the impact preview"), **READS},
    )
    def post(self, request: Request, slug: str) -> Response:
        body = PolicyPreviewSerializer.validated(request.data)
        policy = Policy.objects.filter(team=self.team(), slug=slug).first()
        report = impact_report(
            policy=policy,
            slug=slug,
            document=body["document"],
            limit=body.get("limit", DEFAULT_LISTED),
        )
        return Response({"team": self.team().slug, **report})


class PolicySimulateView(AdminAPIView):
    writes = False

    @extend_schema(
        operation_id="admin_policies_simulate",
        summary="Issuance's answer to a plan for a member under a version or a draft, and "
        "optionally the guard's to a first call (writes nothing)",
        tags=TAGS,
        request=PolicySimulateSerializer,
        responses={200: OpenApiResponse(description="the simulation"), **READS},
    )
    def post(self, request: Request, slug: str) -> Response:
        body = PolicySimulateSerializer.validated(request.data)
        team = self.team()
        policy = _policy(team, slug)
        if "document" in body and "version" in body:
            raise DomainError(
                Code.INVALID_REQUEST,
                "Simulate a draft or a version, not both.",
                errors=[FieldError("version", "leave it out when sending a document")],
            )
        if "document" in body:
            version: Any = policy_draft(policy=policy, document=body["document"])
        else:
            version = (
                policy_active_version(policy=policy)
                if "version" not in body
                else policy.versions.select_related("policy").filter(number=body["version"]).first()
            )
            if version is None:
                raise DomainError(
                    Code.INVALID_REQUEST,
                    "No such version.",
                    errors=[FieldError("version", f"policy {slug} has no such version")],
                )
        member = Member.objects.for_email(team, body["user"]).select_related("role").first()
        if member is None:
            raise DomainError(Code.UNKNOWN_USER, f"{body['user']} is not a member of this team.")
        call = body.get("call")
        if call is None:
            simulated = simulate_plan(version=version, member=member, document=body["plan"])
            return Response({"plan": simulated.as_json()})
        result = simulate_call(
            version=version,
            member=member,
            document=body["plan"],
            tool=call["tool"],
            args=call["args"],
        )
        return Response(result.as_json())


# --- plans and approvals ------------------------------------------------------------------


class PlanListView(AdminAPIView):
    @extend_schema(
        operation_id="admin_plans_list",
        summary="The team's plans, newest first",
        tags=TAGS,
        parameters=[PlanQuerySerializer],
        responses={200: _page_schema(PlanSummarySerializer, "AdminPlanPage"), **READS},
    )
    def get(self, request: Request) -> Response:
        query = _query(PlanQuerySerializer, request)
        rows = Plan.objects.filter(team=self.team()).select_related("member").order_by("-id")
        if query.get("status"):
            rows = rows.filter(status=query["status"])
        if query.get("agent"):
            rows = rows.filter(agent_id=query["agent"].strip().upper())
        if query.get("user"):
            rows = rows.filter(member__email__iexact=query["user"].strip())
        return _page(rows, query, PlanSummarySerializer)


def _plan(team: Team, plan_id: str) -> Plan:
    plan = plan_get_for_team(team=team, plan_id=plan_id)
    return (
        Plan.objects.select_related(
            "team", "agent", "member", "member__role", "policy_version__policy"
        )
        .prefetch_related(Prefetch("tokens"))
        .get(pk=plan.pk)
    )


class PlanDetailView(AdminAPIView):
    @extend_schema(
        operation_id="admin_plans_read",
        summary="A plan: status, steps, token history",
        tags=TAGS,
        responses={200: PlanDetailSerializer, **READS},
    )
    def get(self, request: Request, plan_id: str) -> Response:
        return Response(PlanDetailSerializer(_plan(self.team(), plan_id)).data)


class PlanRevokeView(AdminAPIView):
    @extend_schema(
        operation_id="admin_plans_revoke",
        summary="Revoke a plan (and every plan delegated from it): its agent stops within "
        "the team's revocation bound",
        tags=TAGS,
        request=PlanRevokeSerializer,
        responses={200: PlanRevokedSerializer, **WRITES},
    )
    def post(self, request: Request, plan_id: str) -> Response:
        body = PlanRevokeSerializer.validated(request.data or {})
        plan = _plan(self.team(), plan_id)
        revoked = plan_revoke(plan=plan, reason=body.get("reason", ""))
        return Response(
            PlanRevokedSerializer({"id": plan.id, "revoked": revoked, "status": plan.status}).data
        )


class ApprovalListView(AdminAPIView):
    @extend_schema(
        operation_id="admin_approvals_list",
        summary="The team's plans waiting for a person's decision",
        tags=TAGS,
        parameters=[PageQuerySerializer],
        responses={200: _page_schema(PlanSummarySerializer, "AdminApprovalPage"), **READS},
    )
    def get(self, request: Request) -> Response:
        query = _query(PageQuerySerializer, request)
        rows = (
            plans_awaiting_approval(Plan.objects.filter(team=self.team()))
            .select_related("member")
            .order_by("id")
        )
        return _page(rows, query, PlanSummarySerializer)


class ApprovalDecideView(AdminAPIView):
    @extend_schema(
        operation_id="admin_approvals_decide",
        summary="Approve or deny a waiting plan as the token's person, under the queue's "
        "rules (never one's own plan; only someone allowed to decide it)",
        tags=TAGS,
        request=ApprovalDecideSerializer,
        responses={200: ApprovalDecidedSerializer, **WRITES},
    )
    def post(self, request: Request, plan_id: str) -> Response:
        body = ApprovalDecideSerializer.validated(request.data)
        token = request_admin_token(request)
        plan = _plan(self.team(), plan_id)
        if token.user is None:
            raise DomainError(
                Code.PERMISSION_DENIED,
                "This admin token decides for nobody: create one for a person "
                "(`create_admin_token --user EMAIL`) to decide approvals.",
            )
        decided = plan_approval_decide(
            plan=plan,
            by_user=token.user,
            approve=body["decision"] == "approve",
            reason=body.get("reason", ""),
        )
        return Response(
            ApprovalDecidedSerializer(
                {"plan": plan.id, "approved": decided.approved, "by": decided.by, "at": decided.at}
            ).data
        )
