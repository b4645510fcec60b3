"""Alembic environment: runs pyhybrid's revisions on the configured URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from pyhybrid.migrate import finish_upgrade
from pyhybrid.sqlalchemy import metadata

config = context.config


def run_migrations_online() -> None:
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    with engine.connect() as connection:
        # one transaction for the whole upgrade, finish_upgrade included: it lands whole or not at all,
        # and no caller ever sees a revision's dropped functions before sql/idempotent/ re-creates them
        context.configure(connection=connection, target_metadata=metadata, transaction_per_migration=False)
        with context.begin_transaction():
            # revision 0011 widens the embedding column of a fresh install only
            before = context.get_context().get_current_revision()
            config.attributes["fresh_install"] = before is None
            context.run_migrations()
            # an upgrade that ran revisions re-applies sql/idempotent/ even where its digest is the one recorded
            # (down and up again with one release): a revision may drop what sql/idempotent/ re-creates
            moved = config.attributes.get("upgrading") and context.get_context().get_current_revision() != before
            finish_upgrade(connection.connection.dbapi_connection,
                           force=bool(config.attributes.get("reapply_idempotent") or moved),
                           pg_textsearch=config.attributes.get("pg_textsearch"))


if context.is_offline_mode():
    raise SystemExit("pyhybrid migrations run online only (they inspect the server's extensions)")
run_migrations_online()
