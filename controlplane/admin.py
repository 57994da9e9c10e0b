"""The Plangate admin site: its title, the order of the index, and its login lockout.

``PlangateAdminConfig`` replaces ``django.contrib.admin`` in INSTALLED_APPS, so this module
is imported while the app registry is populated: it must not import models.

The lockout itself is django-axes (settings ``AXES_*``, from ``PLANGATE_LOGIN_*``); this
module gives it the client address, the page a locked-out person sees, and a log line.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest
from django.template.response import TemplateResponse
from rest_framework.throttling import BaseThrottle

security_logger = logging.getLogger("plangate.security")

# The order a person works in: who is in the team, what agents may do, what they did.
APP_ORDER = ["members", "teams", "policies", "plans", "auth"]
MODEL_ORDER = {
    "members": ["Member", "Agent", "ApiKey"],
    "teams": ["Role", "Group", "Team"],
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
    # "View site": the page at / (controlplane/home.py), which says what this server is and
    # links the console, the API reference and the public keys.
    site_url = "/"

    def get_urls(self):
        # Imported here: this module is loaded while the app registry is being populated.
        from django.urls import path

        from identity.mfa_views import mfa_recovery_codes, mfa_setup, mfa_verify
        from members.admin_invite import SetPasswordView, invite_view

        def page(view):
            return self.admin_view(lambda request: view(self, request))

        return [
            path("mfa/", page(mfa_verify), name="plangate_mfa"),
            path("mfa/setup/", page(mfa_setup), name="plangate_mfa_setup"),
            path("mfa/recovery-codes/", page(mfa_recovery_codes), name="plangate_mfa_recovery"),
            path("invite/", self.admin_view(invite_view), name="plangate_invite"),
            # Not behind admin_view: the invited person has no password yet.
            path(
                "welcome/<uidb64>/<token>/",
                SetPasswordView.as_view(),
                name="plangate_set_password",
            ),
            *super().get_urls(),
        ]

    def login(self, request, extra_context=None):
        """The sign-in page: "Sign in with single sign-on" when OIDC is configured, the
        password form unless PASSWORD_LOGIN turned it off (a password POST is then
        refused, whatever it holds)."""
        from django.core.exceptions import PermissionDenied

        from identity.oidc import oidc_enabled, password_login_enabled

        if request.method == "POST" and not password_login_enabled():
            raise PermissionDenied("Password sign-in is turned off: use single sign-on.")
        context = {
            "sso_enabled": oidc_enabled(),
            "password_login": password_login_enabled(),
            "sso_failed": request.GET.get("sso") == "failed",
            **(extra_context or {}),
        }
        return super().login(request, context)

    def index(self, request, extra_context=None):
        """The index with, above the app list, the overview of the user's teams, or, for
        staff of no team, who can give them access."""
        return super().index(request, {**index_context(request), **(extra_context or {})})

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


#: superusers named on the index of a staff user who belongs to no team
ACCESS_GIVERS_SHOWN = 5


def index_context(request: HttpRequest) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from kernel.admin_scoping import sees_several_teams, user_team_ids
    from members.invite import can_invite
    from plans.overview import overview_read

    user = request.user
    context: dict[str, Any] = {"can_invite": can_invite(user)}
    team_ids = user_team_ids(request)
    if team_ids is not None and not team_ids:
        context["no_team"] = True
        context["access_givers"] = list(
            get_user_model()
            .objects.filter(is_superuser=True, is_active=True)
            .order_by("username")[:ACCESS_GIVERS_SHOWN]
        )
        return context
    context["overview"] = overview_read(team_ids=team_ids)
    context["team_column"] = sees_several_teams(request)
    context["sees_keys"] = user.has_perm("plans.view_signingkey")
    context["sees_approval_queue"] = user.has_perm("notify.view_approvalrequest")
    return context


class PlangateAdminConfig(AdminConfig):
    default_site = "controlplane.admin.PlangateAdminSite"

    def ready(self) -> None:
        super().ready()
        from axes.signals import user_locked_out

        user_locked_out.connect(log_lockout, dispatch_uid="plangate.log_lockout")


def login_client_ip(request: HttpRequest) -> str | None:
    """The address a sign-in attempt counts against (``AXES_CLIENT_IP_CALLABLE``): the same
    client address as the API's rate limits, DRF's, which is REMOTE_ADDR unless
    ``PLANGATE_NUM_PROXIES`` trusted proxies write X-Forwarded-For. A header no trusted
    proxy overwrites is never believed: a client could dodge the lock by changing it."""
    # get_ident reads only request.META, which a Django request has too.
    return BaseThrottle().get_ident(request) or None  # type: ignore[arg-type]


def _cool_off_minutes() -> int:
    return int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)


def login_lockout_response(request: HttpRequest, original_response=None, credentials=None):
    """The page a locked-out sign-in gets (``AXES_LOCKOUT_CALLABLE``): 429, in the admin's
    frame, saying for how long and whom to ask."""
    context = {
        **admin.site.each_context(request),
        "title": "Sign-in locked",
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "cool_off_minutes": _cool_off_minutes(),
    }
    response = TemplateResponse(request, "axes/lockout.html", context, status=429)
    response["Retry-After"] = str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    return response.render()


def log_lockout(sender, request: HttpRequest, username: str | None, ip_address: str, **kwargs):
    """One warning per refused sign-in while an account or address is locked."""
    security_logger.warning(
        "admin sign-in locked out: username=%r address=%s failures=%s; refused for %d "
        "minutes after the last failure (a superuser can lift it: axes_reset_username)",
        username,
        ip_address,
        getattr(request, "axes_failures_since_start", "?"),
        _cool_off_minutes(),
    )
