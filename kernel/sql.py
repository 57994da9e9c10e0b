"""The statements Plangate builds by hand instead of through the ORM, in one place.

Each is kept only under the budget rule of docs/decisions/0061: it serves a measured
target on PostgreSQL, its own step is at least twice as fast as the framework's way, it
uses only documented Django API, and a test holds it to the framework's answer on SQLite
and PostgreSQL. What each one measured is in bench/RESULTS.md.

Kernel module: imports no Plangate app.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from json.encoder import encode_basestring_ascii as _encode_string
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import (
    AutoField,
    BigAutoField,
    BigIntegerField,
    BooleanField,
    CharField,
    DateTimeField,
    Field,
    ForeignKey,
    IntegerField,
    JSONField,
    Model,
    PositiveIntegerField,
    PositiveSmallIntegerField,
    SmallIntegerField,
    TextField,
)

__all__ = ["json_text", "row_insert", "row_insert_if_new", "rows_insert"]


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
    fixed_fields = [field for name, field in by_name.items() if name not in set(varying)]
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
