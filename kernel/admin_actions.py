"""Admin actions: one that is not allowed for the user answers 403 when posted (not a
silent "no action selected"); some are also offered on an object's page; destructive ones
ask for confirmation and then go back where they were started from; a form whose result
must not run twice carries a one-time token.

It imports no model at import time: the admin site is loaded while the app registry is
still being populated.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, TypeVar, cast

from django import forms
from django.contrib import admin
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.http import url_has_allowed_host_and_scheme


class ObjectActionsMixin(admin.ModelAdmin):
    """For a ``ModelAdmin`` (listed before it among the bases): disallowed actions answer
    403, and the actions named in ``object_actions`` are also offered on an object's page.

    An object action is reached by GET on ``<id>/<action>/``; the view calls the action
    with ``next_url=`` (the page to go back to), which the action hands to
    ``confirm_action``. The confirmation page then posts to the change list like any action.
    """

    change_form_template = "admin/plangate/change_form.html"

    #: actions also offered on an object's page, as ``<id>/<action>/``: name -> button label.
    #: Each takes a keyword ``next_url`` and passes it to ``confirm_action``.
    object_actions: dict[str, str] = {}

    def object_action_available(self, obj: Any, action_name: str) -> bool:
        """Whether the action makes sense for ``obj`` now (say, not revoking a revoked key)."""
        return True

    def object_action_allowed(self, request: HttpRequest, action_name: str) -> bool:
        """Whether this user may run the action. The one check behind both the 403 and
        whether a control for it is drawn at all: a person never sees a button, link or
        column that would only answer "forbidden"."""
        return action_name in self.get_actions(request)

    def object_action_url(self, request: HttpRequest, obj: Any, action_name: str) -> str | None:
        """The address of the action on ``obj``'s own page, or None when the user may not
        run it or it makes no sense for ``obj`` now: draw a control only from this."""
        if not self.object_action_allowed(request, action_name):
            return None
        if not self.object_action_available(obj, action_name):
            return None
        info = self.opts.app_label, self.opts.model_name
        return reverse(f"admin:{info[0]}_{info[1]}_{action_name}", args=[quote(obj.pk)])

    def changelist_view(self, request: HttpRequest, extra_context=None):
        if request.method == "POST":
            chosen = [name for name in request.POST.getlist("action") if name]
            allowed = self.get_actions(request)
            if any(name not in allowed for name in chosen):
                raise PermissionDenied
        return super().changelist_view(request, extra_context)

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        extra = [
            path(
                f"<path:object_id>/{name.replace('_', '-')}/",
                self.admin_site.admin_view(self._object_action_view),
                {"action_name": name},
                name=f"{info[0]}_{info[1]}_{name}",
            )
            for name in self.object_actions
        ]
        return extra + super().get_urls()

    def _object_action_view(self, request: HttpRequest, object_id: str, action_name: str):
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404(f"No {self.opts.verbose_name} with id {object_id!r}.")
        # The confirmation page posts to the change list, like every action.
        if not self.object_action_allowed(request, action_name) or request.method != "GET":
            raise PermissionDenied
        # Allowed means listed among the user's actions, so it is there.
        function, _name, _description = cast(tuple, self.get_actions(request)[action_name])
        queryset = self.get_queryset(request).filter(pk=obj.pk)
        next_url = request.GET.get("next") or self._change_url(obj)
        return function(self, request, queryset, next_url=next_url)

    def _change_url(self, obj: Any) -> str:
        info = self.opts.app_label, self.opts.model_name
        return reverse(f"admin:{info[0]}_{info[1]}_change", args=[quote(obj.pk)])

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        links = []
        if obj is not None:
            for name, label in self.object_actions.items():
                url = self.object_action_url(request, obj, name)
                if url is not None:
                    links.append((url, label))
        context["object_action_links"] = links
        return super().render_change_form(request, context, add, change, form_url, obj)


def object_action_allowed(request: HttpRequest, model: type, action_name: str) -> bool:
    """Whether the user may run ``model``'s action, asked of its registered admin: for a
    control drawn on another model's page (an inline's "Revoke…" column)."""
    model_admin: admin.ModelAdmin = admin.site.get_model_admin(model)
    return isinstance(model_admin, ObjectActionsMixin) and model_admin.object_action_allowed(
        request, action_name
    )


FormType = TypeVar("FormType", bound=forms.Form)


def _confirmed(request: HttpRequest) -> bool:
    return request.method == "POST" and request.POST.get("post") == "yes"


def action_form(request: HttpRequest, form_class: type[FormType]) -> FormType:
    """The form of an action's confirmation page (see ``confirm_action``): bound to what the
    page posted once the user confirms, unbound when the page is first shown."""
    return form_class(request.POST if _confirmed(request) else None)


def confirm_action(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet,
    *,
    action: str,
    title: str,
    question: str,
    button: str,
    warning: str = "",
    next_url: str = "",
    form: forms.Form | None = None,
    template: str = "admin/plangate/confirm_action.html",
    extra_context: Callable[[], dict[str, Any]] | None = None,
) -> TemplateResponse | None:
    """None once the user confirmed, else the page asking them to.

    The page posts back to the change list with ``post=yes``, like Django's own "delete
    selected", so the action runs once through the usual permission checks. ``next_url``
    is where to go afterwards when the action was started from an object's page; from the
    change list it is the ``next`` the form posted, if any.

    ``form`` (from ``action_form``) adds fields to the page, such as a reason; the action
    reads its ``cleaned_data`` once this returns None. A confirmation whose form is not
    valid shows the page again, with the form's errors. A ``template`` extending
    ``admin/plangate/confirm_action.html`` may show more (its ``details`` block), from
    what ``extra_context()`` returns: called only when the page is shown, so what it
    computes is not computed again once the user has confirmed.
    """
    if _confirmed(request) and (form is None or form.is_valid()):
        return None
    opts = model_admin.model._meta
    context = {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "question": question,
        "warning": warning,
        "button": button,
        "objects": list(queryset),
        "opts": opts,
        "action": action,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "changelist_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
        "next_url": next_url or request.POST.get("next", ""),
        "form": form,
        **(extra_context() if extra_context is not None else {}),
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, template, context)


def redirect_after_action(request: HttpRequest) -> HttpResponse | None:
    """Back to the page the action was started from, when it is one of ours."""
    next_url = request.POST.get("next", "")
    if next_url and url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return HttpResponseRedirect(next_url)
    return None


class OneTimeFormToken:
    """A single-use token in the session, so a re-posted form (a reload of its result
    page, a double click) does not run twice. The token is random and secret-free."""

    def __init__(self, purpose: str, keep: int = 20) -> None:
        self.session_key = f"plangate.once.{purpose}"
        self.keep = keep

    def issue(self, request: HttpRequest) -> str:
        token = secrets.token_urlsafe(16)
        tokens = [*request.session.get(self.session_key, []), token][-self.keep :]
        request.session[self.session_key] = tokens
        return token

    def consume(self, request: HttpRequest, token: str | None) -> bool:
        tokens = list(request.session.get(self.session_key, []))
        if not token or token not in tokens:
            return False
        tokens.remove(token)
        request.session[self.session_key] = tokens
        return True
