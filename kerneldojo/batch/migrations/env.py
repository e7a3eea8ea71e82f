"""Alembic's environment for the result store: `kerneldojo.batch.db.migrate` passes the connection to use."""

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run the store's migrations with kerneldojo.batch.db.migrate(engine): it passes the connection")
# render_as_batch: SQLite alters a table by copying it, which batch mode does for later migrations.
context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
