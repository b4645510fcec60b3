"""Apply the SQL in sql/ through Alembic: upgrade, downgrade and what the server offers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from ._paths import migrations_dir, sql_dir
from .errors import ExtensionMissingError, InvalidParameterError
from .server import resolve_dsn, sqlalchemy_url

OPTIONAL_EXTENSIONS = {
    "age": "graph retrieval (the graph branch and add_edges)",
    "pg_textsearch": "BM25 ranking (the lexical branch falls back to ts_rank)",
}


@dataclass(frozen=True)
class ExtensionReport:
    """Which extensions the server can install and which pyhybrid features that enables."""

    available: dict[str, str]
    missing_optional: dict[str, str]


def check_extensions(conn: psycopg.Connection[Any]) -> ExtensionReport:
    """Raise ExtensionMissingError without pgvector; report the optional extensions missing."""
    rows = conn.execute(
        "SELECT name, default_version FROM pg_available_extensions WHERE name = ANY(%s)",
        (["vector", *OPTIONAL_EXTENSIONS],),
    ).fetchall()
    available = {str(n): str(v) for n, v in rows}
    if "vector" not in available:
        raise ExtensionMissingError(
            "extension 'vector' (pgvector) is not available on this server; pyhybrid needs it "
            "for embeddings. Install pgvector (https://github.com/pgvector/pgvector) or use the "
            "embedded server (unset PYHYBRID_DSN)."
        )
    missing = {n: d for n, d in OPTIONAL_EXTENSIONS.items() if n not in available}
    return ExtensionReport(available=available, missing_optional=missing)


def apply_sql_file(cursor: Any, path: Path) -> None:
    """Run one SQL file as a single multi-statement string (no parameters)."""
    cursor.execute(path.read_text(encoding="utf-8"))


def _alembic_config(url: str, dim: int | None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["embedding_dim"] = dim
    return cfg


def upgrade(dsn: str | None = None, *, revision: str = "head", dim: int | None = None,
            reapply: bool = False) -> None:
    """Alembic upgrade to revision (default head). dim: embedding dimension for a fresh install.

    reapply: run sql/idempotent/ again afterwards (functions, policies, grants), as `pyhybrid migrate`
    does, so a database already at head picks up their current text. It briefly locks the tables.
    """
    if dim is not None and not (1 <= dim <= 2000):
        raise InvalidParameterError(f"dim must be between 1 and 2000 (HNSW limit), got {dim}")
    from alembic import command

    target = resolve_dsn(dsn)
    command.upgrade(_alembic_config(sqlalchemy_url(target), dim), revision)
    if reapply:
        with psycopg.connect(target) as conn, conn.cursor() as cur:
            for path in sorted(sql_dir().joinpath("idempotent").glob("*.sql")):
                apply_sql_file(cur, path)


def downgrade(dsn: str | None = None, *, revision: str = "base") -> None:
    """Alembic downgrade to revision (default base: removes the hybrid schema and graph)."""
    from alembic import command

    target = resolve_dsn(dsn)
    command.downgrade(_alembic_config(sqlalchemy_url(target), None), revision)


def sql_path(*parts: str) -> Path:
    """A file under sql/."""
    return sql_dir().joinpath(*parts)
