"""Small pieces the admin pages are drawn with: links to other rows, a date-time column, a
typed-in list filter and a textarea for JSON documents.

It imports no model at import time: the admin site is loaded while the app registry is
still being populated.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join, json_script
from django.utils.safestring import SafeString


def admin_link(obj: Any, text: object | None = None) -> str:
    """A link to ``obj``'s admin page (escaped), or its text when it has none."""
    if obj is None:
        return "—"
    opts = obj._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[quote(obj.pk)])
    return format_html('<a href="{}">{}</a>', url, obj if text is None else text)


def admin_links(objects: Iterable[Any], empty: str = "—") -> str:
    links = format_html_join(", ", "{}", ((admin_link(obj),) for obj in objects))
    return links or empty


class MonospaceJSONTextarea(forms.Textarea):
    def __init__(self, attrs: dict | None = None) -> None:
        defaults = {
            "rows": 24,
            "cols": 100,
            "class": "vLargeTextField plangate-json",
            "spellcheck": "false",
            "autocomplete": "off",
            "wrap": "off",
        }
        super().__init__({**defaults, **(attrs or {})})


class JSONEditorWidget(MonospaceJSONTextarea):
    """A JSON document in a real editor (line numbers, highlighting, its problems by line and
    path as it is typed, checked against ``schema``): ``plangate/json-editor.js`` puts
    CodeMirror in place of the textarea, which stays in the form and holds the text. The
    schema goes to the page as data (``json_script``), not as a script."""

    class Media:
        css = {"all": ("plangate/json-editor.css",)}
        js = ("plangate/vendor/codemirror-json.js", "plangate/json-editor.js")

    def __init__(self, schema: dict[str, Any], attrs: dict | None = None) -> None:
        super().__init__(attrs)
        self.schema = schema

    def render(self, name, value, attrs=None, renderer=None) -> SafeString:
        attrs = dict(attrs or {})
        schema_id = f"{attrs.get('id') or name}-schema"
        attrs.update({"data-json-editor": "", "data-json-schema": schema_id})
        return format_html(
            "{}{}",
            super().render(name, value, attrs, renderer),
            json_script(self.schema, schema_id),
        )


class TextInputFilter(admin.SimpleListFilter):
    """A list filter typed into a box instead of picked from a list that could hold
    thousands of choices (every member of a big team)."""

    template = "admin/plangate/input_filter.html"
    placeholder = ""

    def lookups(self, request, model_admin):
        # SimpleListFilter shows only when it has lookups; the box needs none.
        return [("", "")]

    def choices(self, changelist):
        yield {
            "parameter_name": self.parameter_name,
            "value": self.value() or "",
            "placeholder": self.placeholder,
            "hidden": [
                (name, value)
                for name, value in changelist.params.items()
                if name != self.parameter_name
            ],
            "clear_url": changelist.get_query_string(remove=[self.parameter_name]),
        }


def datetime_cell(value, *, seconds: bool = False) -> str:
    """A date-time as ``2026-11-30 09:13`` (or ``09:13:05`` to the second), in the local
    zone (UTC), full value on hover: Django's default ("Nov. 30, 2026, 9:13 a.m.") makes
    wide tables wider."""
    if value is None:
        return "—"
    local = timezone.localtime(value)
    return format_html(
        '<span title="{}" class="plangate-nowrap">{}</span>',
        local.isoformat(),
        local.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"),
    )


def datetime_column(field_name: str, description: str):
    """A list column of ``datetime_cell``s."""

    @admin.display(description=description, ordering=field_name)
    def column(self, obj) -> str:
        return datetime_cell(getattr(obj, field_name))

    return column
