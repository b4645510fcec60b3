"""Where the SQL files and Alembic migrations live, installed or in a checkout."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    for candidate in (_HERE / name, _HERE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pyhybrid: cannot find the {name}/ directory next to {_HERE}")


def sql_dir() -> Path:
    """The sql/ directory: incremental/, idempotent/ and optional/ files."""
    return _find("sql")


def migrations_dir() -> Path:
    """The Alembic migrations directory."""
    return _find("migrations")
