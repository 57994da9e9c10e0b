"""One model row inserted by an INSERT built once per process and database vendor.

``Model.save()`` builds its INSERT anew at every call (the query, its compiler, the SQL
text, the returning clause): on the path of every issuance and refresh that cost more
than running the statement. ``row_insert`` stores what ``save(force_insert=True)`` stores,
each value prepared by its own field (``pre_save`` then ``get_db_prep_save``: defaults,
``auto_now``, JSON, dates), in the caller's transaction. Only the SQL text and the field
list are kept, never a value.

It sends no ``pre_save``/``post_save`` signals and calls no overridden ``save()``: use it
only for models that have neither (a test holds each caller's rows to ``save()``'s). An
automatic primary key is read back with ``RETURNING`` (PostgreSQL, SQLite >= 3.35), as
``save()`` sets it.

Kernel module: imports no Plangate app.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import BooleanField, CharField, Field, Model, TextField

__all__ = ["row_insert"]

# Field classes (exactly these, not subclasses) whose get_db_prep_save answers a value of
# these types, or None, unchanged, on every backend: their values skip the call chain.
_UNCHANGED: dict[type[Field], tuple[type, ...]] = {
    CharField: (str,),
    TextField: (str,),
    BooleanField: (bool,),
}

# (field, the value types it stores unchanged, or None: prepared by the field)
_Column = tuple[Field, tuple[type, ...] | None]

_STATEMENTS: dict[tuple[str, str, bool], tuple[str, tuple[_Column, ...]]] = {}


def _statement(model: type[Model], *, returning: bool) -> tuple[str, tuple[_Column, ...]]:
    """The INSERT of one ``model`` row and the fields it takes, in order: every concrete
    field, but an automatic primary key when it is not given (``returning`` reads it
    back), as save() leaves it out."""
    key = (model._meta.label, connection.vendor, returning)
    statement = _STATEMENTS.get(key)
    if statement is None:
        meta = model._meta
        fields = tuple(
            field for field in meta.concrete_fields if not (returning and field is meta.auto_field)
        )
        quote = connection.ops.quote_name
        columns = ", ".join(quote(field.column) for field in fields)
        placeholders = ", ".join(["%s"] * len(fields))
        # Only the model's own table and column names are formatted in.
        sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({placeholders})"  # noqa: S608
        if returning:
            assert meta.auto_field is not None
            sql += f" RETURNING {quote(meta.auto_field.column)}"
        columns_prepared = tuple((field, _UNCHANGED.get(type(field))) for field in fields)
        statement = _STATEMENTS[key] = (sql, columns_prepared)
    return statement


def row_insert(instance: Model) -> None:
    """Insert ``instance`` as ``instance.save(force_insert=True)`` would, in the caller's
    transaction on the default database; its automatic primary key, if any, is set."""
    meta = instance._meta
    returning = meta.auto_field is not None and instance.pk is None
    sql, columns = _statement(type(instance), returning=returning)
    values = []
    for field, unchanged in columns:
        if unchanged is None:
            values.append(field.get_db_prep_save(field.pre_save(instance, add=True), connection))
            continue
        # These classes' pre_save is Field's: the attribute as it is.
        value = getattr(instance, field.attname)
        if value is None or type(value) in unchanged:
            values.append(value)
        else:
            values.append(field.get_db_prep_save(value, connection))
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        if returning:
            assert meta.auto_field is not None
            setattr(instance, meta.auto_field.attname, cursor.fetchone()[0])
    instance._state.adding = False
    instance._state.db = connection.alias
