from django.urls import path

from . import api

urlpatterns = [
    path("members", api.MemberListView.as_view(), name="admin-api-members"),
    path("members/<str:member_id>", api.MemberDetailView.as_view(), name="admin-api-member"),
    path("roles", api.RoleListView.as_view(), name="admin-api-roles"),
    path("groups", api.GroupListView.as_view(), name="admin-api-groups"),
    path("agents", api.AgentListView.as_view(), name="admin-api-agents"),
    path("agents/<str:agent_id>", api.AgentDetailView.as_view(), name="admin-api-agent"),
    path("agents/<str:agent_id>/keys", api.ApiKeyListView.as_view(), name="admin-api-keys"),
    path(
        "agents/<str:agent_id>/keys/<str:prefix>/revoke",
        api.ApiKeyRevokeView.as_view(),
        name="admin-api-key-revoke",
    ),
    path("policies", api.PolicyListView.as_view(), name="admin-api-policies"),
    path("policies/<slug:slug>", api.PolicyDetailView.as_view(), name="admin-api-policy"),
    path(
        "policies/<slug:slug>/versions",
        api.PolicyVersionListView.as_view(),
        name="admin-api-policy-versions",
    ),
    path(
        "policies/<slug:slug>/versions/<int:number>",
        api.PolicyVersionDetailView.as_view(),
        name="admin-api-policy-version",
    ),
    path(
        "policies/<slug:slug>/preview",
        api.PolicyPreviewView.as_view(),
        name="admin-api-policy-preview",
    ),
    path(
        "policies/<slug:slug>/simulate",
        api.PolicySimulateView.as_view(),
        name="admin-api-policy-simulate",
    ),
    path("plans", api.PlanListView.as_view(), name="admin-api-plans"),
    path("plans/<str:plan_id>", api.PlanDetailView.as_view(), name="admin-api-plan"),
    path("plans/<str:plan_id>/revoke", api.PlanRevokeView.as_view(), name="admin-api-plan-revoke"),
    path("approvals", api.ApprovalListView.as_view(), name="admin-api-approvals"),
    path(
        "approvals/<str:plan_id>/decide",
        api.ApprovalDecideView.as_view(),
        name="admin-api-approval-decide",
    ),
]
