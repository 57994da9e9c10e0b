"""The Plangate admin site: its title and the order of the index.

``PlangateAdminConfig`` replaces ``django.contrib.admin`` in INSTALLED_APPS, so this module
is imported while the app registry is populated: it must not import models.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig

# The order a person works in: who is in the team, what agents may do, what they did.
APP_ORDER = ["members", "policies", "plans", "auth"]
MODEL_ORDER = {
    "members": ["Member", "Role", "Group", "Agent", "ApiKey", "Team"],
    "policies": ["Policy", "PolicyVersion"],
    "plans": ["Plan", "PlanToken", "PlanEvent", "SigningKey"],
    "auth": ["User", "Group"],
}
# Index labels that read better than the model's verbose name.
MODEL_LABELS = {("plans", "Plan"): "Issued plans", ("plans", "PlanEvent"): "Guard decisions"}


def _position(order: list[str], name: str) -> tuple[int, str]:
    return (order.index(name) if name in order else len(order), name)


class PlangateAdminSite(admin.AdminSite):
    site_header = "Plangate"
    site_title = "Plangate admin"
    index_title = "Control plane"

    def get_app_list(self, request, app_label=None):
        app_list = super().get_app_list(request, app_label)
        app_list.sort(key=lambda app: _position(APP_ORDER, app["app_label"]))
        for app in app_list:
            order = MODEL_ORDER.get(app["app_label"], [])
            app["models"].sort(key=lambda model: _position(order, model["object_name"]))
            for model in app["models"]:
                label = MODEL_LABELS.get((app["app_label"], model["object_name"]))
                if label:
                    model["name"] = label
        return app_list


class PlangateAdminConfig(AdminConfig):
    default_site = "controlplane.admin.PlangateAdminSite"
