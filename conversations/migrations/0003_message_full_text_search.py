"""Full-text search over message contents, built per database outside the ORM.

PostgreSQL: a stored generated ``search_vector`` column (English configuration, over the
first 200,000 characters so that a huge message stays under tsvector's 1 MB limit) and a
GIN index on ``(conversation_id, search_vector)`` (``btree_gin``, a trusted extension; a
GIN index on ``search_vector`` alone where it cannot be created).

SQLite: an FTS5 table with external content (the message table) kept in step by
triggers, with the Porter stemmer. Where SQLite lacks FTS5, nothing is created and the
search falls back to a plain scan (``conversations.search``).

Note for later migrations on SQLite: Django rebuilds a table to alter it, which drops its
triggers. A migration that alters ``Message`` must run ``create_sqlite_fts`` again; until
then the search notices the missing trigger and uses the plain scan.
"""

from django.db import DatabaseError, migrations, transaction

PG_FORWARD = [
    "ALTER TABLE conversations_message ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, left(content, 200000))) STORED",
]
PG_INDEX_WITH_SCOPE = (
    "CREATE INDEX conversations_message_search ON conversations_message "
    "USING gin (conversation_id, search_vector)"
)
PG_INDEX_PLAIN = (
    "CREATE INDEX conversations_message_search ON conversations_message USING gin (search_vector)"
)
PG_BACKWARD = [
    "DROP INDEX IF EXISTS conversations_message_search",
    "ALTER TABLE conversations_message DROP COLUMN IF EXISTS search_vector",
]

SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE conversations_message_fts USING fts5("
    "content, conversation_id, content='conversations_message', content_rowid='id', "
    "tokenize='porter unicode61')",
    "CREATE TRIGGER conversations_message_fts_insert AFTER INSERT ON conversations_message "
    "BEGIN INSERT INTO conversations_message_fts(rowid, content, conversation_id) "
    "VALUES (new.id, new.content, new.conversation_id); END",
    "CREATE TRIGGER conversations_message_fts_delete AFTER DELETE ON conversations_message "
    "BEGIN INSERT INTO conversations_message_fts"
    "(conversations_message_fts, rowid, content, conversation_id) "
    "VALUES ('delete', old.id, old.content, old.conversation_id); END",
    "CREATE TRIGGER conversations_message_fts_update "
    "AFTER UPDATE OF content, conversation_id ON conversations_message "
    "BEGIN INSERT INTO conversations_message_fts"
    "(conversations_message_fts, rowid, content, conversation_id) "
    "VALUES ('delete', old.id, old.content, old.conversation_id); "
    "INSERT INTO conversations_message_fts(rowid, content, conversation_id) "
    "VALUES (new.id, new.content, new.conversation_id); END",
    "INSERT INTO conversations_message_fts(conversations_message_fts) VALUES ('rebuild')",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS conversations_message_fts_insert",
    "DROP TRIGGER IF EXISTS conversations_message_fts_delete",
    "DROP TRIGGER IF EXISTS conversations_message_fts_update",
    "DROP TABLE IF EXISTS conversations_message_fts",
]


def _run(schema_editor, statements):
    for sql in statements:
        schema_editor.execute(sql)


def _create_pg(schema_editor) -> None:
    _run(schema_editor, PG_FORWARD)
    try:
        with transaction.atomic(using=schema_editor.connection.alias):
            schema_editor.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    except DatabaseError:
        schema_editor.execute(PG_INDEX_PLAIN)  # no btree_gin: search filters the scope after
    else:
        schema_editor.execute(PG_INDEX_WITH_SCOPE)


def create_sqlite_fts(schema_editor) -> None:
    try:
        with transaction.atomic(using=schema_editor.connection.alias):
            _run(schema_editor, SQLITE_BACKWARD)
            _run(schema_editor, SQLITE_FORWARD)
    except DatabaseError:
        pass  # SQLite built without FTS5: the search uses its plain fallback


def forward(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _create_pg(schema_editor)
    elif vendor == "sqlite":
        create_sqlite_fts(schema_editor)


def backward(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        _run(schema_editor, PG_BACKWARD)
    elif vendor == "sqlite":
        _run(schema_editor, SQLITE_BACKWARD)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0002_summary_tokens")]

    operations = [migrations.RunPython(forward, backward)]
