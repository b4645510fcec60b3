"""Admin at a few thousand tenants (issue 51): every command that reads all of hybrid.chunk in one transaction holds a
lock on each partition and each of its indexes; PostgreSQL's default max_locks_per_transaction (64) ran out of lock
slots for them. The embedded server runs with EMBEDDED_LOCKS_PER_TRANSACTION, and the clients page."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest

from pyhybrid import HybridClient, migrate
from pyhybrid.doctor import check
from pyhybrid.errors import from_psycopg
from pyhybrid.server import EMBEDDED_LOCKS_PER_TRANSACTION
from pyhybrid.transfer import export_tenant, import_tenant
from tests.conftest import WITHOUT_PG_TEXTSEARCH, Db
from tests.helpers import chunks, unit

TENANTS = 2000  # 9 locks a tenant: 18,000, above the default's lock table (64 x ~118 entries) on the embedded server


def test_the_embedded_server_has_lock_slots_for_thousands_of_tenants(admin_dsn: str) -> None:
    if os.environ.get("PYHYBRID_TEST_DSN"):
        pytest.skip("an external server's settings are its owner's (docs/tenancy.md names the one to raise)")
    with psycopg.connect(admin_dsn) as c:
        assert int(c.execute("SHOW max_locks_per_transaction").fetchone()[0]) >= EMBEDDED_LOCKS_PER_TRANSACTION


def test_running_out_of_lock_slots_names_the_section_on_many_tenants() -> None:
    err = from_psycopg(psycopg.errors.OutOfMemory("out of shared memory"))
    assert err.sqlstate == "53200" and "docs/tenancy.md, 'Many tenants and the lock table'" in str(err)


@pytest.mark.slow
def test_every_admin_command_works_at_two_thousand_tenants(db: Db, tmp_path: Path) -> None:
    if os.environ.get("PYHYBRID_TEST_DSN"):
        pytest.skip("needs the embedded server's lock table (an external server's settings are its owner's)")
    with psycopg.connect(db.dsn(), autocommit=True) as c:  # a tenant a transaction, as a SaaS signs them up
        for i in range(TENANTS):
            c.execute("SELECT hybrid.create_tenant(%s, NULL, 'dedicated')", (f"t{i:05d}",))
    with HybridClient(db.dsn("pyh_app")) as client, client.tenant("acme") as t:
        t.ingest(chunks("a", 6))
    with HybridClient(db.dsn()) as client:
        assert len(client.tenants()) == TENANTS + 2
    with psycopg.connect(db.dsn()) as c:  # one transaction each: what failed with out of shared memory
        assert c.execute("SELECT count(*) FROM hybrid.tenants()").fetchone() == (TENANTS + 2,)
        c.rollback()
        assert c.execute("SELECT count(*) FROM hybrid.chunk").fetchone() == (6,)
        c.rollback()
        assert c.execute("SELECT count(*) FROM hybrid.bm25_stats_drift()").fetchone() == (0,)
        c.rollback()
        assert c.execute("SELECT count(*) FROM hybrid.rebuild_bm25_stats()").fetchone() == (TENANTS + 2,)
        c.commit()
        assert c.execute("SELECT count(*) FROM hybrid.refresh_audit_samples()").fetchone() == (TENANTS + 2,)
        c.commit()
        if not WITHOUT_PG_TEXTSEARCH:
            assert len(c.execute("SELECT * FROM hybrid.merge_bm25()").fetchall()) == TENANTS + 2
            c.commit()
            assert len(c.execute("SELECT * FROM hybrid.audit_bm25(queries => 2)").fetchall()) == TENANTS + 2
            c.commit()
    with psycopg.connect(db.dsn(), autocommit=True) as c:
        problems = [f for f in check(c) if f.problem]
    assert problems == []
    migrate.upgrade(db.dsn(), reapply=True)  # an upgrade whose sql/idempotent changed
    migrate.downgrade(db.dsn(), revision="0017")  # down: DDL on hybrid.chunk locks every partition
    migrate.upgrade(db.dsn(), reapply=True)  # and up again: revision 0019 counts every tenant's statistics
    with HybridClient(db.dsn()) as client:
        moved = tmp_path / "acme.jsonl.gz"
        export_tenant(client, "acme", moved)
        assert client.drop_tenant("t00000")["chunks"] == 0
        import_tenant(client, moved, "acme2")
    with HybridClient(db.dsn("pyh_app")) as client, client.tenant("acme2") as t:
        assert len(t.retrieve(query_embedding=unit(3), query_text="pumps", top_k=6)) == 6
