"""A queryset compiled to SQL once per process and database, executed with each request's
values.

Django builds and compiles a queryset anew at every evaluation; for a short indexed read on
the path of every request (authenticating an API key, a status poll) that costs several
times more than running it. ``CompiledQuery`` keeps the query where its rule lives (the
ORM, e.g. ``ApiKeyQuerySet.usable``) and caches only its compilation: the queryset is built
once with sentinel values no request can send, each compiled parameter is mapped back to
the named value it came from, and every call executes that SQL with the call's values. Only
SQL text and the shape of its rows are cached, never a value: a row that changed is read as
it is at the next call.

``instance()`` answers as ``QuerySet.first()`` would on an unordered query: the model
instance with its ``select_related`` relations (and annotations) set exactly as Django's
``ModelIterable`` sets them, after the same field and backend converters (SQLite's text
datetimes, integer booleans and JSON come out as the ORM gives them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model, QuerySet

# Django's helper for select_related rows (ModelIterable's); django-stubs does not declare it.
from django.db.models.query import get_related_populators  # type: ignore[attr-defined]

__all__ = ["CompiledQuery"]

# Datetimes no request sends: 2001-02-03 04:05:06, one microsecond apart per name.
_SENTINEL_DATETIME: Final = datetime(2001, 2, 3, 4, 5, 6, 789, tzinfo=UTC)


@dataclass(frozen=True)
class _Compiled:
    sql: str
    # (True, name) where the call's value goes, (False, constant) where the query had one.
    slots: tuple[tuple[bool, Any], ...]
    col_count: int
    # position -> (converters, expression), as SQLCompiler.get_converters returns them
    converters: tuple[tuple[int, tuple[list[Callable[..., Any]], Any]], ...]
    # what ModelIterable derives from the compiler, for instance()
    model: type[Model] | None
    model_slice: slice
    init_list: tuple[str, ...]
    related_populators: tuple[Any, ...]
    annotation_columns: tuple[tuple[str, int], ...]


class CompiledQuery:
    """``build(**values)`` compiled once per (connection alias, vendor).

    ``text`` names the values that reach the SQL unchanged (strings compared with ``=``);
    ``datetimes`` those prepared as a ``DateTimeField`` prepares them. Compiling raises
    ValueError if a named value does not come out as one parameter (a value the query
    transforms, such as a ``LIKE`` pattern, cannot be cached this way).
    """

    def __init__(
        self,
        build: Callable[..., QuerySet[Any]],
        *,
        text: Iterable[str] = (),
        datetimes: Iterable[str] = (),
        using: str = DEFAULT_DB_ALIAS,
    ) -> None:
        self._build = build
        self._text = tuple(text)
        self._datetimes = tuple(datetimes)
        self._using = using
        self._compiled: dict[tuple[str, str], _Compiled] = {}
        self._lock = threading.Lock()

    def row(self, **values: Any) -> tuple[Any, ...] | None:
        """The first row, converted as the ORM converts it, or None."""
        connection = connections[self._using]
        compiled = self._compiled_for(connection)
        raw = self._fetch(connection, compiled, values)
        return None if raw is None else self._convert(connection, compiled, raw)

    def instance(self, **values: Any) -> Any:
        """The first row as its model instance, relations and annotations set, or None."""
        connection = connections[self._using]
        compiled = self._compiled_for(connection)
        if compiled.model is None:
            raise TypeError("instance() needs a queryset of model instances, not values()")
        raw = self._fetch(connection, compiled, values)
        if raw is None:
            return None
        row = self._convert(connection, compiled, raw)
        obj = compiled.model.from_db(self._using, compiled.init_list, row[compiled.model_slice])
        for populator in compiled.related_populators:
            populator.populate(row, obj)
        for name, position in compiled.annotation_columns:
            setattr(obj, name, row[position])
        return obj

    def sql(self) -> str:
        """The cached SQL text for the default connection (for tests and EXPLAIN)."""
        return self._compiled_for(connections[self._using]).sql

    def _compiled_for(self, connection: BaseDatabaseWrapper) -> _Compiled:
        key = (connection.alias, connection.vendor)
        compiled = self._compiled.get(key)
        if compiled is None:
            with self._lock:
                compiled = self._compiled.get(key) or self._compile(connection)
                self._compiled[key] = compiled
        return compiled

    def _compile(self, connection: BaseDatabaseWrapper) -> _Compiled:
        sentinels: dict[str, Any] = {name: f"\x01{name}\x01" for name in self._text}
        for offset, name in enumerate(self._datetimes):
            sentinels[name] = _SENTINEL_DATETIME + timedelta(microseconds=offset)
        queryset = self._build(**sentinels)
        compiler = queryset.query.get_compiler(connection=connection)
        sql, params = compiler.as_sql()  # also sets compiler.select, klass_info, ...
        names: dict[Any, str] = {sentinels[name]: name for name in self._text}
        for name in self._datetimes:
            names[connection.ops.adapt_datetimefield_value(sentinels[name])] = name
        slots = tuple(
            (True, names[param]) if _hashable(param) and param in names else (False, param)
            for param in params
        )
        missing = set(sentinels) - {name for is_value, name in slots if is_value}
        if missing:
            raise ValueError(f"values not found as parameters of the compiled query: {missing}")

        select = compiler.select
        col_count = compiler.col_count
        # The backend's converters are methods of the compiling thread's connection.ops; they
        # read only the alias's settings (its time zone), the same for every thread's wrapper.
        converters = compiler.get_converters([column[0] for column in select[:col_count]])
        klass_info = compiler.klass_info
        model: type[Model] | None = None
        model_slice = slice(0, 0)
        init_list: tuple[str, ...] = ()
        populators: tuple[Any, ...] = ()
        if klass_info is not None:  # a queryset of instances, not values()
            model = klass_info["model"]
            select_fields = klass_info["select_fields"]
            model_slice = slice(select_fields[0], select_fields[-1] + 1)
            init_list = tuple(column[0].target.attname for column in select[model_slice])
            # RelatedPopulator keeps only positions and setters: safe to share across calls.
            populators = tuple(get_related_populators(klass_info, select, self._using))
        return _Compiled(
            sql=sql,
            slots=slots,
            col_count=col_count,
            converters=tuple(converters.items()),
            model=model,
            model_slice=model_slice,
            init_list=init_list,
            related_populators=populators,
            annotation_columns=tuple((compiler.annotation_col_map or {}).items()),
        )

    def _fetch(
        self, connection: BaseDatabaseWrapper, compiled: _Compiled, values: dict[str, Any]
    ) -> tuple[Any, ...] | None:
        prepared = dict(values)
        for name in self._datetimes:
            prepared[name] = connection.ops.adapt_datetimefield_value(values[name])
        params = [prepared[slot] if is_value else slot for is_value, slot in compiled.slots]
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            return cursor.fetchone()

    @staticmethod
    def _convert(
        connection: BaseDatabaseWrapper, compiled: _Compiled, raw: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        if not compiled.converters:
            return tuple(raw)
        row = list(raw)
        # As SQLCompiler.apply_converters does, for one row.
        for position, (functions, expression) in compiled.converters:
            value = row[position]
            for function in functions:
                value = function(value, expression, connection)
            row[position] = value
        return tuple(row)


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
