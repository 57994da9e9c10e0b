"""Request guards that run before any view."""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse


class RejectNulMiddleware:
    """A NUL character in the path or the query string is bad input, answered 400.

    PostgreSQL can neither store nor compare text holding NUL, so an object id or a search
    term carrying one (``/admin/plans/plan/%00/change/``, ``?q=%00``) would otherwise fail in
    the database, as a 500, wherever a view happens to query with it. JSON bodies are checked
    by the API's parser, plans and policies by the guard's validation, form fields by
    Django's own validators.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path or any(
            "\x00" in key or any("\x00" in value for value in values)
            for key, values in request.GET.lists()
        ):
            raise BadRequest("NUL (\\u0000) in the URL")
        return self.get_response(request)
