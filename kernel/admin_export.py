"""Export an admin change list, as filtered, to CSV or JSON Lines.

Usage: put ``ExportMixin`` before the admin's base class and declare the columns, each a
``(header, accessor)`` pair; an accessor is an attribute path (``"agent.name"``, dots
follow relations) or a callable taking the row::

    @admin.register(AuditRecord)
    class AuditRecordAdmin(ExportMixin, ReadOnlyAdmin):
        export_columns = (
            ("at", "at"),
            ("kind", "kind"),
            ("agent", lambda record: record.agent_name or None),
        )
        export_filename = "audit-trail"  # optional; defaults to the model's plural name

A column may also be ``Derived(path, transform)``: the value at ``path``, passed through
``transform``. An admin whose accessors are all paths or ``Derived`` can set
``export_from_values = True``: its rows are then read as tuples of exactly those fields
(``values_list``), with no model instance built per row and no column of the joined rows
fetched that the export does not show (a plan's document, a policy version's).

The change list then shows "Export CSV" and "Export JSON Lines" buttons that carry its
query string, so the export holds every row of the filtered, searched and ordered list,
all pages of it, not only a selection. An admin with its own ``change_list_template``
extends ``admin/plangate/change_list.html`` (which draws the buttons) instead of
``admin/change_list.html``.

The views are ``<changelist>/export/csv/`` and ``<changelist>/export/jsonl/``, named
``admin:<app>_<model>_export_csv`` / ``_export_jsonl``; they need the view permission and
see the rows the change list sees (team scoping included, since they use its queryset).
Rows are streamed from a database iterator in chunks, so a big export holds neither the
table nor the file in memory.

Cells: ``None`` is empty in CSV and ``null`` in JSON; dates are ISO 8601; dicts and lists
are compact JSON in a CSV cell and nested values in JSON Lines. A CSV text cell starting
with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is prefixed with ``'`` so a
spreadsheet shows it instead of evaluating it as a formula (OWASP "CSV injection"); JSON
Lines are data for programs and are left as they are.

It imports no model at import time: the admin site is loaded while the app registry is
still being populated.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any, ClassVar

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ERROR_FLAG, PAGE_VAR
from django.core.exceptions import PermissionDenied
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponseRedirect, StreamingHttpResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.text import slugify


@dataclass(frozen=True)
class Derived:
    """A column's value: the one at ``path`` (dots follow relations), through
    ``transform``."""

    path: str
    transform: Callable[[Any], object]


Accessor = str | Callable[[Any], object] | Derived
ExportColumns = tuple[tuple[str, Accessor], ...]

#: characters that make a spreadsheet read a cell as a formula
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")

EXPORT_FORMATS = {
    "csv": ("text/csv; charset=utf-8", "csv", "Export CSV"),
    "jsonl": ("application/jsonl; charset=utf-8", "jsonl", "Export JSON Lines"),
}

_EXPORTING_ATTRIBUTE = "_plangate_exporting"


def column_value(obj: Any, accessor: Accessor) -> object:
    """The value a column reads from ``obj``; a missing relation on the way reads None."""
    if isinstance(accessor, Derived):
        return accessor.transform(column_value(obj, accessor.path))
    if callable(accessor):
        return accessor(obj)
    value: object = obj
    for name in accessor.split("."):
        if value is None:
            return None
        value = getattr(value, name)
    return value() if callable(value) else value


def csv_cell(value: object) -> str:
    """A value as a CSV cell that no spreadsheet evaluates."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, int | float):
        # Numbers are not formulas, a negative one included.
        return str(value)
    if isinstance(value, dict | list | tuple):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, cls=DjangoJSONEncoder)
    else:
        text = str(value)
    return "'" + text if text.startswith(FORMULA_TRIGGERS) else text


class _Echo:
    """A file whose ``write`` returns what it was given, so ``csv.writer`` makes lines for
    a stream instead of filling a buffer."""

    def write(self, value: str) -> str:
        return value


def column_values(columns: ExportColumns, rows: Iterable[Any]) -> Iterator[list[object]]:
    """Each row's cells: read by ``column_value`` from a model instance."""
    for row in rows:
        yield [column_value(row, accessor) for _, accessor in columns]


def _values_path(accessor: Accessor) -> str:
    path = accessor.path if isinstance(accessor, Derived) else accessor
    if not isinstance(path, str):
        raise TypeError("export_from_values takes field paths and Derived columns only")
    return path.replace(".", "__")


def values_cells(columns: ExportColumns, rows: Iterable[tuple[Any, ...]]) -> Iterator[list[object]]:
    """Each row's cells, from a ``values_list`` of the columns' paths (in their order)."""
    transforms = [
        accessor.transform if isinstance(accessor, Derived) else None for _, accessor in columns
    ]
    if not any(transforms):
        for row in rows:
            yield list(row)
        return
    for row in rows:
        yield [
            value if transform is None else transform(value)
            for value, transform in zip(row, transforms, strict=True)
        ]


def csv_lines(columns: ExportColumns, rows: Iterable[Any]) -> Iterator[str]:
    """The CSV of model instances ``rows``, header first."""
    return _csv_text([header for header, _ in columns], column_values(columns, rows))


def json_lines(columns: ExportColumns, rows: Iterable[Any]) -> Iterator[str]:
    """The JSON Lines of model instances ``rows``."""
    return _json_text([header for header, _ in columns], column_values(columns, rows))


#: how much text the stream sends at a time: one write per chunk, not one per row
STREAM_CHUNK_CHARACTERS = 64 * 1024


def _chunked(lines: Iterable[str]) -> Iterator[str]:
    """``lines`` joined into pieces of about STREAM_CHUNK_CHARACTERS."""
    pending: list[str] = []
    size = 0
    for line in lines:
        pending.append(line)
        size += len(line)
        if size >= STREAM_CHUNK_CHARACTERS:
            yield "".join(pending)
            pending, size = [], 0
    if pending:
        yield "".join(pending)


def _csv_text(headers: list[str], cells: Iterable[list[object]]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(headers)
    for row in cells:
        yield writer.writerow([csv_cell(value) for value in row])


def _json_text(headers: list[str], cells: Iterable[list[object]]) -> Iterator[str]:
    for row in cells:
        yield (
            json.dumps(
                dict(zip(headers, row, strict=True)), ensure_ascii=False, cls=DjangoJSONEncoder
            )
            + "\n"
        )


class ExportMixin(admin.ModelAdmin):
    """For a ``ModelAdmin`` (listed before it among the bases): "Export CSV" and "Export
    JSON Lines" of the current filtered change list. See the module's docstring."""

    change_list_template = "admin/plangate/change_list.html"

    #: the exported columns: ``(header, accessor)``; see the module's docstring
    export_columns: ClassVar[ExportColumns] = ()
    #: the file's name before the date and extension; the model's plural name when empty
    export_filename: ClassVar[str] = ""
    #: rows fetched per database round trip while streaming
    export_chunk_size: ClassVar[int] = 2000
    #: read the rows as tuples of the columns' fields (``values_list``), not as model
    #: instances: every accessor must be a field path or ``Derived``
    export_from_values: ClassVar[bool] = False
    #: more JSON Lines exports of the same rows, each line an object built from a row:
    #: format -> (button label, ``line(obj) -> dict``); e.g. the trail's OCSF events
    extra_json_exports: ClassVar[dict[str, tuple[str, Callable[[Any], dict[str, Any]]]]] = {}

    def _export_formats(self) -> list[str]:
        return [*EXPORT_FORMATS, *self.extra_json_exports]

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        # Before the admin's own: its "<path:object_id>/" would take "export/csv/".
        return [
            path(
                f"export/{export_format}/",
                self.admin_site.admin_view(self.export_view),
                {"export_format": export_format},
                name=f"{info[0]}_{info[1]}_export_{export_format}",
            )
            for export_format in self._export_formats()
        ] + super().get_urls()

    def export_links(self, request: HttpRequest) -> list[tuple[str, str]]:
        """(label, url) of each export of the list as ``request`` shows it."""
        query = request.GET.copy()
        for name in (PAGE_VAR, ERROR_FLAG):
            query.pop(name, None)
        suffix = f"?{query.urlencode()}" if query else ""
        info = self.opts.app_label, self.opts.model_name
        labels = {name: label for name, (_, _, label) in EXPORT_FORMATS.items()}
        labels |= {name: label for name, (label, _) in self.extra_json_exports.items()}
        return [
            (label, reverse(f"admin:{info[0]}_{info[1]}_export_{export_format}") + suffix)
            for export_format, label in labels.items()
        ]

    def changelist_view(self, request: HttpRequest, extra_context=None):
        context = dict(extra_context or {})
        if self.export_columns:
            context.setdefault("export_links", self.export_links(request))
        return super().changelist_view(request, context)

    def get_changelist(self, request: HttpRequest, **kwargs):
        changelist_class = super().get_changelist(request, **kwargs)
        if not getattr(request, _EXPORTING_ATTRIBUTE, False):
            return changelist_class

        class ExportChangeList(changelist_class):  # type: ignore[misc,valid-type]
            def get_results(self, request: HttpRequest) -> None:
                # The export streams the whole queryset itself: no count, no page.
                self.result_list: list[Any] = []
                self.result_count = self.full_result_count = 0

        return ExportChangeList

    def export_queryset(self, request: HttpRequest):
        """The change list's queryset for ``request``: scoped, filtered, searched, ordered."""
        setattr(request, _EXPORTING_ATTRIBUTE, True)
        try:
            return self.get_changelist_instance(request).queryset
        finally:
            setattr(request, _EXPORTING_ATTRIBUTE, False)

    def export_view(self, request: HttpRequest, export_format: str):
        if not self.export_columns or not self.has_view_permission(request):
            raise PermissionDenied
        try:
            queryset = self.export_queryset(request)
        except IncorrectLookupParameters:
            # What the change list itself does with a filter it cannot apply.
            info = self.opts.app_label, self.opts.model_name
            return HttpResponseRedirect(
                reverse(f"admin:{info[0]}_{info[1]}_changelist") + f"?{ERROR_FLAG}=1"
            )
        columns = self.export_columns
        if export_format in self.extra_json_exports:
            _, line = self.extra_json_exports[export_format]
            objects = queryset.iterator(chunk_size=self.export_chunk_size)
            content_type, extension = EXPORT_FORMATS["jsonl"][:2]
            body: Iterable[str] = (
                json.dumps(line(obj), ensure_ascii=False, cls=DjangoJSONEncoder) + "\n"
                for obj in objects
            )
            return self._export_response(body, content_type, f"{export_format}.{extension}")
        content_type, extension, _ = EXPORT_FORMATS[export_format]
        if self.export_from_values:
            paths = [_values_path(accessor) for _, accessor in columns]
            tuples = queryset.values_list(*paths).iterator(chunk_size=self.export_chunk_size)
            cells = values_cells(columns, tuples)
        else:
            cells = column_values(columns, queryset.iterator(chunk_size=self.export_chunk_size))
        lines = _csv_text if export_format == "csv" else _json_text
        return self._export_response(
            lines([header for header, _ in columns], cells), content_type, extension
        )

    def _export_response(
        self, lines: Iterable[str], content_type: str, extension: str
    ) -> StreamingHttpResponse:
        response = StreamingHttpResponse(_chunked(lines), content_type=content_type)
        name = self.export_filename or slugify(str(self.opts.verbose_name_plural))
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        response["Content-Disposition"] = f'attachment; filename="{name}-{stamp}.{extension}"'
        response["Cache-Control"] = "no-store"
        return response
