"""The statements Plangate builds by hand instead of through the ORM, in one place.

Each is kept only under the budget rule of docs/decisions/0061: it serves a measured
target on PostgreSQL, its own step is at least twice as fast as the framework's way, it
uses only documented Django API, and a test holds it to the framework's answer on SQLite
and PostgreSQL. Decision 0061 lists what each one measured; bench/shortcut_steps.py
(reads) and bench/shortcut_write_steps.py (writes) measure them again.

Kernel module: imports no Plangate app.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from json.encoder import encode_basestring_ascii as _encode_string
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import (
    AutoField,
    BigAutoField,
    BigIntegerField,
    BooleanField,
    CharField,
    DateTimeField,
    EmailField,
    Field,
    ForeignKey,
    IntegerField,
    JSONField,
    Model,
    PositiveIntegerField,
    PositiveSmallIntegerField,
    SlugField,
    SmallIntegerField,
    TextField,
)

__all__ = [
    "counter_hit",
    "counter_hits",
    "json_text",
    "related_columns",
    "related_instance",
    "row_insert",
    "row_insert_if_new",
    "row_read",
    "rows_insert",
    "statement",
]


# --- Writes ---------------------------------------------------------------------------
#
# Three INSERT builders, each storing what the ORM's own insert stores (``save()`` or
# ``bulk_create``), in the caller's transaction on the default database. Every value goes
# through one preparation (``_preparation``, applied by ``_prepared``): the field's
# ``get_db_prep_save`` as the ORM's insert calls it, after the field's ``pre_save`` for an
# instance's values (defaults, ``auto_now_add``). They send no ``pre_save``/``post_save``
# signals and call no overridden ``save()``: use them only for models that have neither.
# tests/kernel/test_row_insert.py and the callers' tests hold their rows to the ORM's on
# SQLite and PostgreSQL.

# How a field's value becomes its parameter: the value types the field sends as they are,
# and the function that prepares any other value (given the database connection).
_Preparation = tuple[tuple[type, ...], Callable[[Any, BaseDatabaseWrapper], Any]]
# (field, its preparation)
_Prepared = tuple[Field, _Preparation]

_NONE = type(None)
# Field classes (exactly these, not subclasses) whose get_db_prep_save answers a value of
# these types unchanged on SQLite and PostgreSQL.
_UNCHANGED: dict[type[Field], tuple[type, ...]] = {
    CharField: (str, _NONE),
    TextField: (str, _NONE),
    BooleanField: (bool, _NONE),
    IntegerField: (int, _NONE),
    BigIntegerField: (int, _NONE),
    SmallIntegerField: (int, _NONE),
    PositiveIntegerField: (int, _NONE),
    PositiveSmallIntegerField: (int, _NONE),
    AutoField: (int, _NONE),
    BigAutoField: (int, _NONE),
}


def _preparation(field: Field) -> _Preparation:
    """How a value of ``field`` becomes the parameter the ORM's INSERT sends for it: the
    one value preparation of every builder here (``_prepared``). ``get_db_prep_save``, but
    where its answer is known without the call chain, which is most of a row: a value the
    field sends unchanged (``_UNCHANGED``), its target field's for a foreign key; an aware
    datetime, which it hands to the backend's adapter
    (``connection.ops.adapt_datetimefield_value``) as it is; a JSON value, sent as its
    text (``json_text``), which SQLite's adapter writes and PostgreSQL reads into jsonb."""
    if type(field) is ForeignKey:
        return _preparation(field.target_field)[0], field.get_db_prep_save
    if type(field) is JSONField and field.encoder is None:

        def prepared_json(value: Any, db: BaseDatabaseWrapper) -> Any:
            if hasattr(value, "resolve_expression"):
                return field.get_db_prep_save(value, db)
            return json_text(value)

        return (_NONE,), prepared_json
    if type(field) is DateTimeField:

        def prepared_datetime(value: Any, db: BaseDatabaseWrapper) -> Any:
            if type(value) is datetime and value.tzinfo is not None:
                return db.ops.adapt_datetimefield_value(value)
            return field.get_db_prep_save(value, db)

        return (_NONE,), prepared_datetime
    return _UNCHANGED.get(type(field), ()), field.get_db_prep_save


def _prepared(preparation: _Preparation, value: Any, db: BaseDatabaseWrapper) -> Any:
    unchanged, prepare = preparation
    return value if type(value) in unchanged else prepare(value, db)


# Each object key's JSON text and separator, for the keys the code writes (a record's
# ``details``), up to a bound: an argument's keys come from the agent.
_KEY_TEXTS: dict[str, str] = {}
_KEY_TEXTS_MAX = 512


def json_text(value: Any) -> str:
    """``value`` written as ``json.dumps(value)`` writes it.

    A record's ``details`` and ``rule`` are one flat object of texts, integers, booleans
    and nulls, for which ``json.dumps`` spends more on setting up its encoder than on the
    text: such an object is written here by the same C string encoder ``json.dumps`` uses,
    with the same separators; anything else goes to ``json.dumps``.
    tests/plans/test_plan_events_json_text.py holds it to ``json.dumps``'s answer."""
    if type(value) is not dict:
        return json.dumps(value)
    parts = []
    for key, item in value.items():
        kind = type(item)
        if kind is str:
            text = _encode_string(item)
        elif item is None:
            text = "null"
        elif kind is int:
            text = int.__repr__(item)
        elif kind is bool:
            text = "true" if item else "false"
        else:
            return json.dumps(value)
        prefix = _KEY_TEXTS.get(key)
        if prefix is None:
            if type(key) is not str:
                return json.dumps(value)
            prefix = _encode_string(key) + ": "
            if len(_KEY_TEXTS) < _KEY_TEXTS_MAX:
                _KEY_TEXTS[key] = prefix
        parts.append(prefix + text)
    return "{" + ", ".join(parts) + "}"


def _instance_values(
    instance: Model, preparations: Sequence[_Prepared], db: BaseDatabaseWrapper
) -> list[Any]:
    """The parameters of ``instance``'s row: each field's ``pre_save`` (defaults,
    ``auto_now_add``) then its preparation."""
    return [
        _prepared(preparation, field.pre_save(instance, add=True), db)
        for field, preparation in preparations
    ]


def _insert_sql(
    db: BaseDatabaseWrapper, model: type[Model], fields: Sequence[Field], *, suffix: str = ""
) -> str:
    quote = db.ops.quote_name
    columns = ", ".join(quote(field.column) for field in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    # Only the model's own table and column names are formatted in.
    return (
        f"INSERT INTO {quote(model._meta.db_table)} ({columns}) "  # noqa: S608
        f"VALUES ({placeholders}){suffix}"
    )


# (label, vendor, kind) -> the statement, and the fields it takes in order with their
# preparations
_INSERTS: dict[tuple[str, str, str], tuple[str, tuple[_Prepared, ...]]] = {}


def _row_statement(
    db: BaseDatabaseWrapper, model: type[Model], kind: str
) -> tuple[str, tuple[_Prepared, ...]]:
    """The INSERT of one ``model`` row, built once per process and vendor. ``kind``:
    "given" (every concrete field, the primary key given), "returning" (an automatic
    primary key left out and read back, as save() leaves it out) or "if_new" (as
    "returning", but nothing inserted when a unique constraint finds the row stored)."""
    key = (model._meta.label, db.vendor, kind)
    statement = _INSERTS.get(key)
    if statement is None:
        meta = model._meta
        fields = tuple(
            field
            for field in meta.concrete_fields
            if kind == "given" or field is not meta.auto_field
        )
        suffix = ""
        if kind != "given":
            assert meta.auto_field is not None
            conflict = " ON CONFLICT DO NOTHING" if kind == "if_new" else ""
            suffix = f"{conflict} RETURNING {db.ops.quote_name(meta.auto_field.column)}"
        statement = _INSERTS[key] = (
            _insert_sql(db, model, fields, suffix=suffix),
            tuple((field, _preparation(field)) for field in fields),
        )
    return statement


def _inserted(instance: Model, db: BaseDatabaseWrapper, pk: Any = None) -> None:
    if pk is not None:
        assert instance._meta.auto_field is not None
        setattr(instance, instance._meta.auto_field.attname, pk)
    instance._state.adding = False
    instance._state.db = db.alias


def row_insert(instance: Model) -> None:
    """Insert ``instance`` as ``instance.save(force_insert=True)`` would; its automatic
    primary key, if any, is set (``RETURNING``: PostgreSQL, SQLite >= 3.35).

    ``save()`` builds its INSERT anew at every call (the query, its compiler, the SQL
    text); here only the SQL text and the field list are kept, never a value."""
    db = connections[DEFAULT_DB_ALIAS]
    returning = instance._meta.auto_field is not None and instance.pk is None
    sql, preparations = _row_statement(db, type(instance), "returning" if returning else "given")
    with db.cursor() as cursor:
        cursor.execute(sql, _instance_values(instance, preparations, db))
        pk = cursor.fetchone()[0] if returning else None
    _inserted(instance, db, pk)


def row_insert_if_new(instance: Model) -> bool:
    """Insert ``instance``, whose automatic primary key is not given, unless a unique
    constraint finds it stored already: True when it was inserted (its primary key set),
    False when it was there.

    One statement, ``INSERT ... ON CONFLICT DO NOTHING RETURNING``, instead of the ORM's
    savepoint, ``save()`` and release around an insert that may fail. A second attempt
    arriving while the first is uncommitted waits for it on PostgreSQL, then inserts
    nothing."""
    db = connections[DEFAULT_DB_ALIAS]
    sql, preparations = _row_statement(db, type(instance), "if_new")
    with db.cursor() as cursor:
        cursor.execute(sql, _instance_values(instance, preparations, db))
        row = cursor.fetchone()
    if row is None:
        return False
    _inserted(instance, db, row[0])
    return True


def rows_insert(template: Model, varying: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Insert one row per item of ``rows``: a copy of ``template`` whose ``varying`` fields
    hold the item's values (in that order), as ``bulk_create`` of such copies stores them,
    in one statement: ``COPY ... FROM STDIN`` on PostgreSQL, ``executemany`` elsewhere.

    The template's values are prepared once, each varying value by its field; no instance
    is built per row and no primary key is set on anything. A varying field must not be
    ``auto_now``/``auto_now_add`` (its ``pre_save`` would replace the value)."""
    if not rows:
        return
    db = connections[DEFAULT_DB_ALIAS]
    meta = template._meta
    by_name = {field.name: field for field in meta.concrete_fields if not field.primary_key}
    varying_fields = [by_name[name] for name in varying]
    assert not any(
        getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
        for field in varying_fields
    )
    varying_names = set(varying)
    fixed_fields = [field for name, field in by_name.items() if name not in varying_names]
    fixed = _instance_values(template, [(field, _preparation(field)) for field in fixed_fields], db)
    preparations = [_preparation(field) for field in varying_fields]
    # _prepared, written out: the loop that runs for every value of a batch.
    prepared = [
        [
            value if type(value) in unchanged else prepare(value, db)
            for (unchanged, prepare), value in zip(preparations, row, strict=True)
        ]
        + fixed
        for row in rows
    ]
    fields = varying_fields + fixed_fields
    if db.vendor == "postgresql":
        quote = db.ops.quote_name
        columns = ", ".join(quote(field.column) for field in fields)
        _copy_rows(db, f"COPY {quote(meta.db_table)} ({columns}) FROM STDIN", prepared)
        return
    with db.cursor() as cursor:
        cursor.executemany(_insert_sql(db, type(template), fields), prepared)


def _copy_rows(db: BaseDatabaseWrapper, statement: str, rows: list[list[Any]]) -> None:
    """PostgreSQL: the rows through one ``COPY ... FROM STDIN`` (psycopg's
    ``Cursor.copy``). Its client would bind a multi-row INSERT's thousands of parameters
    in Python; COPY writes them in its C code. Errors become Django's, and the statement is
    logged where Django logs its own (``connection.queries``), so query counts see it."""
    started = time.monotonic()
    with db.cursor() as cursor, db.wrap_database_errors, cursor.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)
    if db.queries_logged:
        db.queries_log.append(
            {"sql": f"{statement} -- {len(rows)} rows", "time": f"{time.monotonic() - started:.3f}"}
        )


# --- Reads ----------------------------------------------------------------------------
#
# A hand-built read is kept where its own step, measured on PostgreSQL, is at least twice
# as fast as the ORM's (bench/shortcut_steps.py; the figures are in decision 0061). Its
# text is built once per database connection alias and vendor from the models' own table
# and column names (``statement``), every value is a parameter, and it runs through
# Django's cursor (``row_read``) or ``Model.objects.raw``: documented API only. Each has a
# test holding it to the ORM's answer on SQLite and PostgreSQL. The rate-limit counter's
# two statements live here whole (kernel.ratelimit calls them); a domain read's text is
# built by its app's selector, beside the ORM rule it restates, and cached here.

_STATEMENTS: dict[tuple[str, str, str], str] = {}


def statement(name: str, build: Callable[[], str]) -> str:
    """The SQL text ``build()`` makes for the default connection, built once per process,
    connection alias and vendor. ``name`` says which read it is (unique per caller)."""
    key = (connection.alias, connection.vendor, name)
    text = _STATEMENTS.get(key)
    if text is None:
        text = _STATEMENTS[key] = build()
    return text


def row_read(sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    """The first row ``sql`` answers with ``params``, as the database driver returns it."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else tuple(row)


# Field classes (exactly these) whose values every driver answers as the ORM gives them,
# but booleans, which SQLite answers as 0 and 1 (``bool`` makes them the ORM's).
_READ_AS_IS: tuple[type[Field], ...] = (
    AutoField,
    BigAutoField,
    CharField,
    SlugField,
    EmailField,
    TextField,
    BooleanField,
    IntegerField,
    BigIntegerField,
    SmallIntegerField,
    PositiveIntegerField,
    PositiveSmallIntegerField,
)


def _read_as_is(field: Field) -> bool:
    if isinstance(field, ForeignKey):
        field = field.target_field
    return type(field) in _READ_AS_IS


def related_columns(model: type[Model], alias: str) -> str:
    """The select list of ``model``'s columns (``alias`` its table's name in the statement)
    that ``related_instance`` loads: every concrete field a driver answers as the ORM does,
    each named ``<alias>__<attname>``. Dates and JSON are left out; the instance defers
    them, and reading one costs a query (which the query-count tests would show)."""
    quote = connection.ops.quote_name
    return ", ".join(
        f"{alias}.{quote(field.column)} AS {quote(f'{alias}__{field.attname}')}"
        for field in model._meta.concrete_fields
        if _read_as_is(field)
    )


_Related = TypeVar("_Related", bound=Model)


def related_instance(model: type[_Related], alias: str, row: Model) -> _Related:
    """The instance of ``model`` whose ``related_columns`` a ``Model.objects.raw`` row
    carries, as ``Model.from_db`` loads one."""
    fields = [field for field in model._meta.concrete_fields if _read_as_is(field)]
    values = []
    for field in fields:
        value = getattr(row, f"{alias}__{field.attname}")
        if isinstance(field, BooleanField) and value is not None:
            value = bool(value)
        values.append(value)
    return model.from_db(row._state.db, [field.attname for field in fields], values)


def _counter_table() -> str:
    from .models import RateLimitWindow  # the kernel's own model

    return connection.ops.quote_name(RateLimitWindow._meta.db_table)


def counter_hits(bucket: str) -> int:
    """The count of the rate-limit counter ``bucket``, 0 when it has none yet. Before every
    authentication: 3-4x cheaper than the ORM's ``values_list`` read (decision 0061)."""
    sql = statement(
        "counter_hits",
        lambda: f"SELECT hits FROM {_counter_table()} WHERE bucket = %s",  # noqa: S608
    )
    row = row_read(sql, [bucket])
    return int(row[0]) if row else 0


def counter_hit(bucket: str, window_end: int) -> int:
    """Count one hit of the rate-limit counter ``bucket``, creating it; returns its count.

    One statement that inserts the first hit or increments the row and returns the count:
    atomic on SQLite and PostgreSQL alike, with no read-then-write race and no
    IntegrityError to retry. The ORM cannot say "count + 1 on conflict" in one statement.
    """
    # The statement is its own transaction on PostgreSQL outside a caller's: its commit
    # need not wait for the WAL to reach the disk (synchronous_commit off, for this
    # transaction only). A counter is the one write a crash may lose the last fraction of
    # a second of, harmlessly: the count is atomic and visible to every process as before.
    # Inside a caller's transaction the setting would reach the caller's commit, so it is
    # left alone.
    asynchronous = connection.vendor == "postgresql" and not connection.in_atomic_block

    def build() -> str:
        table = _counter_table()
        source = (
            "SELECT %s, %s, 1 FROM (SELECT set_config('synchronous_commit', 'off', true)) AS c"
            if asynchronous
            else "VALUES (%s, %s, 1)"
        )
        return (
            f"INSERT INTO {table} (bucket, window_end, hits) {source} "
            f"ON CONFLICT (bucket) DO UPDATE SET hits = {table}.hits + 1 RETURNING hits"
        )

    sql = statement("counter_hit_commit_async" if asynchronous else "counter_hit", build)
    row = row_read(sql, [bucket, window_end])
    assert row is not None  # RETURNING answers the row it wrote
    return int(row[0])
