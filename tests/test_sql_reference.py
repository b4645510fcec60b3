"""docs/sql-reference.md is what the catalog says, and the registry of hybrid.setting keys is complete and
agrees with the defaults the function bodies use."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import psycopg

from tests.conftest import Db

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import sql_reference  # noqa: E402


def test_the_committed_sql_reference_is_the_one_the_catalog_gives(db: Db) -> None:
    fresh = sql_reference.render(db.dsn())
    committed = sql_reference.OUT.read_text()
    assert committed == fresh, f"docs/sql-reference.md is stale: run `{sql_reference.COMMAND}` and commit it"


def _registry(db: Db) -> dict[str, str | None]:
    with psycopg.connect(db.dsn()) as c:
        return dict(c.execute("SELECT key, default_value FROM hybrid.setting_keys()").fetchall())


def _bodies(db: Db) -> str:
    with psycopg.connect(db.dsn()) as c:
        rows = c.execute("SELECT p.proname, p.prosrc FROM pg_proc p WHERE p.pronamespace = 'hybrid'::regnamespace"
                         ).fetchall()
    return "\n".join(f"-- {name}\n{src}" for name, src in rows)


def test_every_setting_key_the_sql_and_the_package_use_is_in_the_registry(db: Db) -> None:
    used = set(re.findall(r"\bkey = '(\w+)'", _bodies(db)))
    for path in [*(ROOT / "sql").rglob("*.sql"), *(ROOT / "pyhybrid").glob("*.py")]:
        text = path.read_text()
        used |= set(re.findall(r"\bkey = '(\w+)'", text))
        for values in re.findall(r"INSERT INTO hybrid\.setting \(key, value\) VALUES (.*)", text):
            used |= set(re.findall(r"\('(\w+)'", values))
    registry = _registry(db)
    assert used - set(registry) == set(), "add the key to sql/idempotent/002_settings_registry.sql"
    assert set(registry) - used == set(), "a registered key nothing reads or writes"


def test_the_registrys_defaults_are_the_literals_the_function_bodies_fall_back_to(db: Db) -> None:
    """Each default in the registry against the literal the code uses when the key is absent (the bodies do not
    read the registry yet: these literals are copies, and this test is what keeps them equal)."""
    bodies, registry = _bodies(db), _registry(db)
    literals = {
        "exact_threshold": re.findall(r"s\.key = 'exact_threshold'\), (\d+)\)", bodies),
        "hnsw_dense_rows": re.findall(r"coalesce\(v_dense, '(\d+)'\)", bodies),
        "dense_audit_rows": re.findall(r"coalesce\(v_audit, '(\d+)'\)", bodies),
        "ivfflat_rows": re.findall(r"coalesce\(v_min, '(\d+)'\)", bodies),
        "ivfflat_probes": re.findall(r"s\.key = 'ivfflat_probes'\), '(\d+)'\)", bodies),
        "tenant_placement": re.findall(r"s\.key = 'tenant_placement'\), '(\w+)'\)", bodies),
        "pool_max_chunks": re.findall(r"x\.key = 'pool_max_chunks'\), (\d+)\)", bodies),
        "embedding_dim": re.findall(r"current_setting\('hybrid\.install_dim', true\), ''\), '(\d+)'\)",
                                    (ROOT / "sql" / "incremental" / "0001_schema.sql").read_text()),
        "graph": re.findall(r"VALUES \('graph', '(\w+)'\)", (ROOT / "sql" / "optional" / "age_graph.sql").read_text()),
    }
    assert {k: set(v) for k, v in literals.items()} == {k: {registry[k]} for k in literals}
    assert {k for k, v in registry.items() if v is not None} == set(literals), "a default without its check"
