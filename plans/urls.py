from django.urls import path

from . import api, status_feed, status_list

urlpatterns = [
    path("agent", api.AgentSelfView.as_view(), name="agent-self"),
    path("plans", api.PlanCreateView.as_view(), name="plan-create"),
    path("plans/<str:plan_id>", api.PlanDetailView.as_view(), name="plan-detail"),
    path("plans/<str:plan_id>/token", api.PlanTokenView.as_view(), name="plan-token"),
    path("plans/<str:plan_id>/refresh", api.PlanRefreshView.as_view(), name="plan-refresh"),
    path(
        "plans/<str:plan_id>/delegations",
        api.PlanDelegationView.as_view(),
        name="plan-delegations",
    ),
    path("plans/<str:plan_id>/status", status_feed.plan_status_view, name="plan-status"),
    path("plans/<str:plan_id>/events", api.PlanEventsView.as_view(), name="plan-events"),
    path("keys/jwks", api.JwksView.as_view(), name="jwks"),
    path("status-lists/<str:team_id>", status_list.status_list_view, name="status-list"),
]
