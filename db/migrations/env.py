"""Alembic environment: runs the migrations on the connection that `db.schema` hands over.

`db.schema` opens the transaction and passes its connection in `config.attributes["connection"]`,
so the check, every step and the version stamp commit together. For writing a new revision with
the alembic command line: `alembic -c db/alembic.ini -x db=PATH_OR_URL revision --autogenerate -m ...`.
"""

from __future__ import annotations

from alembic import context

from db.models import Base


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite can only add columns in place; other changes rebuild the table (batch mode).
        render_as_batch=connection.dialect.name == "sqlite",
        transactional_ddl=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    from db.engine import make_engine

    target = context.get_x_argument(as_dictionary=True).get("db")
    if not target:
        raise SystemExit("give the database: alembic -c db/alembic.ini -x db=PATH_OR_URL ...")
    with make_engine(target).begin() as conn:
        _run(conn)
