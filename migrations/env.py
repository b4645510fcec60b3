"""Alembic environment: runs pyhybrid's revisions on the configured URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from pyhybrid.sqlalchemy import metadata

config = context.config


def run_migrations_online() -> None:
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=metadata, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("pyhybrid migrations run online only (they inspect the server's extensions)")
run_migrations_online()
