"""An install without pg_textsearch on a server that offers it (issue 50, part 2): `pyhybrid migrate
--no-pg-textsearch` installs everything but the BM25 index, later upgrades keep that choice, doctor names the
lexical scorer, BM25 ranks by the SQL scorer over the tenant's statistics, and --pg-textsearch brings the index
back. Managed PostgreSQL without the extension behaves so."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from pyhybrid import migrate
from pyhybrid.cli import main
from pyhybrid.doctor import check
from pyhybrid.errors import SchemaError

pytestmark = pytest.mark.usefixtures("require_bm25")  # the server must offer it, for the choice to mean anything


def _one(dsn: str, sql: str) -> object:
    with psycopg.connect(dsn) as c:
        row = c.execute(sql).fetchone()
    return None if row is None else row[0]


def _findings(dsn: str) -> dict[str, tuple[str, bool]]:
    with psycopg.connect(dsn) as c:
        return {f.subject: (f.state, f.problem) for f in check(c)}


def test_an_install_without_it_keeps_that_choice_and_ranks_by_bm25_from_its_own_statistics(empty_db: str) -> None:
    assert main(["--dsn", empty_db, "migrate", "--no-pg-textsearch"]) == 0
    assert _one(empty_db, "SELECT hybrid.bm25_available()") is False
    assert _one(empty_db, "SELECT count(*) FROM pg_extension WHERE extname = 'pg_textsearch'") == 0
    migrate.upgrade(empty_db, reapply=True)  # a later upgrade keeps the choice
    assert _one(empty_db, "SELECT hybrid.bm25_available()") is False
    with psycopg.connect(empty_db, autocommit=True) as c:
        c.execute("SELECT hybrid.create_tenant('t')")
        c.execute("SELECT set_config('hybrid.tenant_id', 't', false), set_config('hybrid.acl_labels', '*', false)")
        c.execute("BEGIN")
        c.execute("SELECT hybrid.begin_ingest()")
        c.execute("INSERT INTO pg_temp.hybrid_chunk_stage (chunk_id, document_id, content) VALUES "
                  "('a', 'd', 'the occlusion alarm sounds'), ('b', 'd', 'battery charge')")
        c.execute("SELECT * FROM hybrid.finish_ingest('default')")
        c.execute("COMMIT")
        report = c.execute("SELECT hybrid.explain_retrieve(query_text => 'occlusion alarm')").fetchone()[0]
        rows = c.execute("SELECT chunk_id FROM hybrid_retrieve(query_text => 'occlusion alarm')").fetchall()
    assert rows == [("a",)]
    assert next(b for b in report["branches"] if b["branch"] == "lexical")["plan"] == (
        "BM25 by the SQL scorer over the GIN index (the tenant's statistics; the install goes without pg_textsearch)")
    findings = _findings(empty_db)
    assert findings["lexical scorer"] == ("BM25 by the SQL scorer over each tenant's statistics (the install goes "
                                          "without pg_textsearch: migrate --no-pg-textsearch)", False)
    assert findings["index chunk_content_bm25"][1] is False  # not a problem: chosen
    assert findings["extension pg_textsearch"][1] is False
    # and back: the index is installed, BM25 ranks
    migrate.upgrade(empty_db, pg_textsearch=True)
    assert _one(empty_db, "SELECT hybrid.bm25_available()") is True
    assert _findings(empty_db)["lexical scorer"][0].startswith("BM25 by pg_textsearch's index")


def test_the_choice_is_refused_on_an_install_that_has_the_index(empty_db: str) -> None:
    migrate.upgrade(empty_db)
    assert _one(empty_db, "SELECT hybrid.bm25_available()") is True
    with pytest.raises(SchemaError, match="--no-pg-textsearch: this install has its BM25 index already"):
        migrate.upgrade(empty_db, pg_textsearch=False)
    assert _one(empty_db, "SELECT count(*) FROM hybrid.setting WHERE key = 'pg_textsearch'") == 0  # nothing written


# the tests of retrieval and tenancy, again on databases installed without pg_textsearch's index (tests/conftest.py
# reads PYHYBRID_TEST_PG_TEXTSEARCH): BM25 from the SQL scorer alone, everything else as on the full install
ROOT = Path(__file__).resolve().parents[1]
SUITES = ["tests/test_retrieve.py", "tests/test_tenancy.py", "tests/test_security.py", "tests/test_zero_leaks.py",
          "tests/test_tenant_lifecycle.py", "tests/test_bm25_sql.py", "tests/test_abstain.py"]


@pytest.mark.slow
def test_retrieval_and_tenancy_tests_pass_on_an_install_without_pg_textsearch() -> None:
    env = {**os.environ, "PYHYBRID_TEST_PG_TEXTSEARCH": "off"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITES], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1200)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
    print(summary)  # how many passed, and how many skipped for needing pg_textsearch's index
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert int(re.search(r"(\d+) passed", summary).group(1)) > 150, summary  # type: ignore[union-attr]
