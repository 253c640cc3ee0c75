"""The usage write of every model call as one statement, its SQL built once per process.

``POST /api.php`` writes a usage record on every call. On PostgreSQL it commits without
waiting for the disk flush (``USAGE_ASYNC_COMMIT``): through the ORM that takes a
transaction of its own and a ``SET LOCAL`` (four round trips where this makes one, and on a
busy machine each round trip waits for the server process to be scheduled). Here the text
is made once from the model's own metadata (table, columns, quoting of the database in
use), so it follows every migration, and each call only binds values, which still go
through the fields' own conversions (``pre_save``, ``get_db_prep_save``).

Nothing else should need this: everywhere else, the ORM.
"""

import functools

from django.db import connections, models, router

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
    """
    model = type(obj)
    alias = router.db_for_write(model)
    connection = connections[alias]
    # Inside a transaction the setting would last until its end and cover its other writes.
    sql, fields = _insert_plan(model, alias, durable or connection.in_atomic_block)
    params = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
