from django.urls import path, re_path

from . import views

urlpatterns = [
    path("ServiceProviderConfig", views.ServiceProviderConfigView.as_view(), name="scim-spc"),
    path("ResourceTypes", views.ResourceTypesView.as_view(), name="scim-resource-types"),
    path("ResourceTypes/<str:name>", views.ResourceTypesView.as_view(), name="scim-resource-type"),
    path("Schemas", views.SchemasView.as_view(), name="scim-schemas"),
    path("Schemas/<str:urn>", views.SchemasView.as_view(), name="scim-schema"),
    path(".search", views.RootSearchView.as_view(), name="scim-search"),
    path("Users", views.UsersView.as_view(), name="scim-users"),
    path("Users/.search", views.UsersSearchView.as_view(), name="scim-users-search"),
    path("Users/<str:resource_id>", views.UserView.as_view(), name="scim-user"),
    path("Groups", views.GroupsView.as_view(), name="scim-groups"),
    path("Groups/.search", views.GroupsSearchView.as_view(), name="scim-groups-search"),
    path("Groups/<str:resource_id>", views.GroupView.as_view(), name="scim-group"),
    re_path(r"^.*$", views.NotFoundView.as_view(), name="scim-not-found"),
]
