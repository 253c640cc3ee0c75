"""The two statements every model call runs, with their SQL built once per process.

``POST /api.php`` reads its key and writes a usage record on every call. Through the
ORM's query compiler those two statements cost about a sixth of the request's
instructions (callgrind), because the compiler builds the same SQL text again each time.
Here the text is made once from the model's own metadata (table, columns, quoting of the
database in use), so it follows every migration, and each call only binds values. Values
still go through the fields' own conversions (``pre_save``, ``get_db_prep_save``, the
converters of ``raw()``).

Nothing else should need this: everywhere else, the ORM.

Both are the statements a request meets a dropped database connection with (the key read
is its first statement), so both are retried once on a new connection (``core.db``).
"""

import functools
from typing import TypeVar

from django.db import connections, models, router
from django.db.models.expressions import Col

from core.db import retry_if_dropped

M = TypeVar("M", bound=models.Model)


@functools.cache
def _select_plan(
    model: type[models.Model], field_name: str, alias: str
) -> tuple[str, tuple[str, ...], tuple[Col, ...]]:
    quote = connections[alias].ops.quote_name
    meta = model._meta
    fields = meta.concrete_fields
    columns = ", ".join(quote(f.column) for f in fields)
    column = quote(meta.get_field(field_name).column)
    sql = f"SELECT {columns} FROM {quote(meta.db_table)} WHERE {column} = %s"
    return sql, tuple(f.attname for f in fields), tuple(f.get_col(meta.db_table) for f in fields)


def get_by(model: type[M], field_name: str, value: object) -> M | None:
    """The row whose unique ``field_name`` is ``value``, or None.

    The row becomes a model instance as the ORM makes one (the converters of the database
    and of each field, then ``Model.from_db``), without ``raw()``'s work of matching the
    cursor's columns to fields again on every call.
    """
    alias = router.db_for_read(model)
    sql, names, cols = _select_plan(model, field_name, alias)

    def read() -> M | None:
        connection = connections[alias]
        with connection.cursor() as cursor:
            cursor.execute(sql, [value])
            row = cursor.fetchone()
        if row is None:
            return None
        values = list(row)
        for index, col in enumerate(cols):
            for convert in connection.ops.get_db_converters(col) + col.get_db_converters(
                connection
            ):
                values[index] = convert(values[index], col, connection)
        return model.from_db(alias, names, values)

    return retry_if_dropped(read, using=alias)


# PostgreSQL commits the statement without waiting for its WAL to reach the disk. One
# statement, so it needs no transaction of its own (SET LOCAL would): in autocommit mode
# the setting is local to the statement's own transaction, over when the statement is.
_ASYNC_COMMIT = "WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true)) "


@functools.cache
def _insert_plan(
    model: type[models.Model], alias: str, durable: bool
) -> tuple[str, tuple[models.Field, ...]]:
    connection = connections[alias]
    quote = connection.ops.quote_name
    meta = model._meta
    fields = tuple(f for f in meta.concrete_fields if not f.generated and f is not meta.pk)
    columns = ", ".join(quote(f.column) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    insert = f"INSERT INTO {quote(meta.db_table)} ({columns})"
    if durable or connection.vendor != "postgresql":
        return f"{insert} VALUES ({placeholders})", fields
    return f"{_ASYNC_COMMIT}{insert} SELECT {placeholders} FROM async_commit", fields


def insert(obj: models.Model, *, durable: bool = True) -> None:
    """Inserts ``obj`` as a new row, as ``save()`` would, but without signals and without
    reading back its primary key (``obj.pk`` stays unset).

    ``durable=False`` lets PostgreSQL commit without waiting for the disk (asynchronous
    commit): a crash of the database server, not of this process, may lose the rows of
    its last fraction of a second (3 x ``wal_writer_delay`` at most). That is SQLite's
    everyday durability here (WAL with ``synchronous=NORMAL``) and saves a disk flush.
    Only in autocommit mode: inside a transaction the row commits with it.

    In autocommit mode a connection found dropped is replaced and the insert made again: if
    the server was cut off after committing but before answering, the row is there twice.
    """
    model = type(obj)
    alias = router.db_for_write(model)
    connection = connections[alias]
    # Inside a transaction the setting would last until its end and cover its other writes.
    sql, fields = _insert_plan(model, alias, durable or connection.in_atomic_block)
    params = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]

    def write() -> None:
        with connections[alias].cursor() as cursor:
            cursor.execute(sql, params)

    retry_if_dropped(write, using=alias)
