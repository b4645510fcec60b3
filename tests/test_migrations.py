"""Alembic: upgrade on an empty database, downgrade to base, upgrade again; upgraded == fresh."""

from __future__ import annotations

import uuid
from typing import Iterator

import psycopg
import pytest
from psycopg import conninfo

from pyhybrid import migrate

FINGERPRINT = {
    "columns": """SELECT table_schema, table_name, column_name, data_type, udt_name, is_nullable, column_default,
                         generation_expression
                  FROM information_schema.columns WHERE table_schema IN ('hybrid', 'hybrid_graph')
                  ORDER BY 1, 2, 3""",
    "indexes": """SELECT schemaname, tablename, indexname, regexp_replace(indexdef, '_ag_label_[a-z]+', '') FROM pg_indexes
                  WHERE schemaname IN ('hybrid', 'hybrid_graph') ORDER BY 1, 2, 3""",
    "constraints": """SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
                      WHERE connamespace = 'hybrid'::regnamespace ORDER BY 1, 2""",
    "policies": """SELECT schemaname, tablename, policyname, cmd, roles::text, qual, with_check FROM pg_policies
                   WHERE schemaname IN ('hybrid', 'hybrid_graph') ORDER BY 1, 2, 3""",
    "rls": """SELECT c.oid::regclass::text, c.relrowsecurity, c.relforcerowsecurity, c.relacl::text FROM pg_class c
              WHERE c.relnamespace IN ('hybrid'::regnamespace, 'hybrid_graph'::regnamespace) AND c.relkind IN ('r', 'p')
              ORDER BY 1""",
    "functions": """SELECT p.oid::regprocedure::text, md5(p.prosrc), p.provolatile, p.prosecdef, p.proconfig::text,
                           p.proacl::text, obj_description(p.oid, 'pg_proc')
                    FROM pg_proc p WHERE p.pronamespace = 'hybrid'::regnamespace
                       OR (p.pronamespace = 'public'::regnamespace AND p.proname = 'hybrid_retrieve') ORDER BY 1""",
    "settings": "SELECT key, value FROM hybrid.setting ORDER BY 1",
}


def fingerprint(dsn: str) -> dict[str, list[tuple]]:
    with psycopg.connect(dsn) as c:
        return {k: c.execute(q).fetchall() for k, q in FINGERPRINT.items()}  # type: ignore[arg-type]


@pytest.fixture()
def empty_db(admin_dsn: str) -> Iterator[str]:
    name = f"pyh_m_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    yield conninfo.make_conninfo(admin_dsn, dbname=name)
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_upgrade_downgrade_upgrade_leaves_a_schema_equal_to_a_fresh_install(empty_db: str, template_db: str,
                                                                            admin_dsn: str) -> None:
    migrate.upgrade(empty_db)
    fresh = fingerprint(empty_db)
    assert fresh["functions"] and fresh["policies"] and fresh["indexes"]
    migrate.downgrade(empty_db)
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT count(*) FROM pg_namespace WHERE nspname IN ('hybrid', 'hybrid_graph')").fetchone() == (0,)
        assert c.execute("SELECT version_num FROM alembic_version").fetchall() == []
    migrate.upgrade(empty_db)
    assert fingerprint(empty_db) == fresh


def test_install_records_the_chosen_embedding_dimension(empty_db: str) -> None:
    migrate.upgrade(empty_db, dim=768)
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT hybrid.embedding_dim()").fetchone() == (768,)
        assert c.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                         "WHERE attrelid = 'hybrid.chunk'::regclass AND attname = 'embedding'").fetchone() == ("vector(768)",)


def test_every_public_function_is_documented(template_db: str, admin_dsn: str) -> None:
    with psycopg.connect(conninfo.make_conninfo(admin_dsn, dbname=template_db)) as c:
        undocumented = c.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'hybrid'::regnamespace "
            "AND p.proname NOT LIKE '\\_%' AND obj_description(p.oid, 'pg_proc') IS NULL").fetchall()
    assert undocumented == []


def test_bad_dimension_is_refused_before_anything_is_written(empty_db: str) -> None:
    from pyhybrid import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="dim must be between 1 and 2000"):
        migrate.upgrade(empty_db, dim=4096)


def test_sqlalchemy_table_definitions_match_the_installed_schema(template_db: str, admin_dsn: str) -> None:
    import warnings

    from sqlalchemy import create_engine, inspect
    from sqlalchemy.exc import SAWarning

    from pyhybrid.server import sqlalchemy_url
    from pyhybrid.sqlalchemy import metadata

    engine = create_engine(sqlalchemy_url(conninfo.make_conninfo(admin_dsn, dbname=template_db)))
    try:
        inspector = inspect(engine)
        for table in metadata.sorted_tables:
            with warnings.catch_warnings():  # SQLAlchemy does not know pgvector's type by name
                warnings.simplefilter("ignore", SAWarning)
                installed = {c["name"] for c in inspector.get_columns(table.name, schema="hybrid")}
            assert {c.name for c in table.columns} == installed, table.name
    finally:
        engine.dispose()
