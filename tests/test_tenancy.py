"""Tenant isolation by row-level security, as the tenancy model in DESIGN.md promises."""

from __future__ import annotations

import psycopg
import pytest

from pyhybrid import HybridClient, TenantError
from tests.conftest import Db
from tests.helpers import chunks


def _seed(db: Db) -> None:
    with HybridClient(db.dsn("pyh_app")) as c:
        with c.tenant("acme") as t:
            t.ingest(chunks("a", 5))
        with c.tenant("globex") as t:
            t.ingest(chunks("g", 3))


def _count(dsn: str, tenant: str | None, table: str = "hybrid.chunk", acl: str | None = None) -> int:
    """How many rows of table the caller sees; for hybrid.chunk through the API (tenant login roles hold no
    privilege on the tables), for other tables directly (as an app role)."""
    with psycopg.connect(dsn) as conn:
        if tenant is not None:
            conn.execute("SELECT set_config('hybrid.tenant_id', %s, false)", (tenant,))
        if acl is not None:
            conn.execute("SELECT set_config('hybrid.acl_labels', %s, false)", (acl,))
        if table == "hybrid.chunk":  # every helper chunk says "pumps"
            row = conn.execute("SELECT count(*) FROM hybrid_retrieve(query_text => 'pumps', top_k => 1000, "
                               "lexical => 'ts_rank')").fetchone()
        else:
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert row is not None
        return int(row[0])


@pytest.mark.parametrize("table", ["hybrid.chunk", "hybrid.corpus", "hybrid.graph_node", 'hybrid_graph."Chunk"',
                                   "hybrid_graph._ag_label_edge"])
def test_a_tenant_login_role_holds_no_privilege_on_the_tables_with_tenant_data(db: Db, table: str) -> None:
    _seed(db)
    with psycopg.connect(db.dsn("pyh_acme")) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(f"SELECT count(*) FROM {table}")


def test_tenant_login_role_sees_only_its_own_rows(db: Db) -> None:
    _seed(db)
    assert _count(db.dsn("pyh_acme"), "acme") == 5
    assert _count(db.dsn("pyh_globex"), "globex") == 3


def test_no_tenant_set_shows_zero_rows_except_to_a_role_granted_exactly_one_tenant(db: Db) -> None:
    _seed(db)
    assert _count(db.dsn("pyh_app"), None) == 0
    assert _count(db.dsn("pyh_nobody"), None) == 0
    assert _count(db.dsn("pyh_acme"), None) == 5  # its one tenant is its context
    with psycopg.connect(db.dsn(), autocommit=True) as admin:  # a role granted two tenants must choose
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = 'pyh_two'").fetchone() is None:
            admin.execute("CREATE ROLE pyh_two LOGIN PASSWORD 'pyh_two'")
        admin.execute("SELECT hybrid.grant_tenant('pyh_two', 'acme'), hybrid.grant_tenant('pyh_two', 'globex')")
    assert _count(db.dsn("pyh_two"), None) == 0
    assert _count(db.dsn("pyh_two"), "globex") == 3


def test_a_tenant_login_role_gets_timeouts_in_this_database(db: Db) -> None:
    # role settings are per database: this clone of the template gets them when the grant is made here
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        admin.execute("SELECT hybrid.grant_tenant('pyh_acme', 'acme', ARRAY['quality'])")
    with psycopg.connect(db.dsn("pyh_acme")) as c:
        got = {k: c.execute(f"SHOW {k}").fetchone()[0]  # type: ignore[index]
               for k in ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")}
    assert got == {"statement_timeout": "30s", "lock_timeout": "5s", "idle_in_transaction_session_timeout": "1min"}


def test_tenant_role_setting_another_tenant_sees_none_of_its_rows(db: Db) -> None:
    _seed(db)
    assert _count(db.dsn("pyh_acme"), "globex") == 0
    assert _count(db.dsn("pyh_nobody"), "acme") == 0


def test_insert_of_another_tenants_row_fails_with_42501(db: Db) -> None:
    _seed(db)
    with psycopg.connect(db.dsn("pyh_acme")) as conn:
        conn.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO hybrid.chunk (tenant_id, chunk_id, corpus_id, document_id, content, content_hash) "
                "VALUES ('globex', 'x', 'default', 'd', 'c', 'h')"
            )


def test_app_role_sees_exactly_the_tenant_of_the_transaction(db: Db) -> None:
    _seed(db)
    with HybridClient(db.dsn("pyh_app")) as c:
        for tenant, n in (("acme", 5), ("globex", 3)):
            with c.tenant(tenant) as t:
                rows = t.conn.execute("SELECT DISTINCT tenant_id FROM hybrid.chunk").fetchall()
                assert [r["tenant_id"] for r in rows] == [tenant]
                assert t.conn.execute("SELECT count(*) AS n FROM hybrid.chunk").fetchone() == {"n": n}
        # the setting is transaction-scoped: after commit there is no tenant again
        with c.connection() as conn:
            assert conn.execute("SELECT count(*) AS n FROM hybrid.chunk").fetchone() == {"n": 0}


def test_acl_labels_restrict_chunks_within_a_tenant(db: Db) -> None:
    with HybridClient(db.dsn("pyh_app")) as c:
        with c.tenant("acme") as t:
            t.ingest(chunks("pub", 2) + chunks("sec", 2, acl_labels=("quality",)))
        with c.tenant("acme") as t:
            assert t.conn.execute("SELECT count(*) AS n FROM hybrid.chunk").fetchone() == {"n": 2}
        with c.tenant("acme", acl_labels=["quality"]) as t:
            assert t.conn.execute("SELECT count(*) AS n FROM hybrid.chunk").fetchone() == {"n": 4}
    # a tenant role may claim only the labels it was granted (it sees chunks through the API)
    assert _count(db.dsn("pyh_acme"), "acme") == 4
    assert _count(db.dsn("pyh_acme"), "acme", acl="finance") == 2


def test_ingest_through_client_as_other_tenant_role_raises_tenant_error(db: Db) -> None:
    with HybridClient(db.dsn("pyh_acme")) as c:
        with pytest.raises(TenantError, match="no tenant"):
            with c.tenant("globex") as t:
                t.ingest(chunks("x", 1))


def _graph(db: Db) -> None:
    with HybridClient(db.dsn("pyh_app")) as c:
        with c.tenant("acme") as t:
            t.ingest(chunks("a", 3))
            t.add_edges([{"src": "a-0", "dst": "a-1", "rel": "LINKS"}, {"src": "a-1", "dst": "a-2", "rel": "LINKS"}])
        with c.tenant("globex") as t:
            t.ingest(chunks("g", 2))
            t.add_edges([{"src": "g-0", "dst": "g-1", "rel": "LINKS"}])


@pytest.mark.usefixtures("require_age")
def test_graph_label_tables_obey_the_tenant_rules(db: Db) -> None:
    _graph(db)
    # acme: 3 chunk vertices, 2 LINKS edges; globex: 2 and 1 (LINKS is each tenant's first type: rel_0)
    for table, acme, globex in (('hybrid_graph._ag_label_vertex', 3, 2), ('hybrid_graph."Chunk"', 3, 2),
                                ('hybrid_graph._ag_label_edge', 2, 1), ('hybrid_graph.rel_0', 2, 1),
                                ("hybrid.graph_node", 3, 2)):
        assert _count(db.dsn("pyh_app"), "acme", table) == acme, table
        assert _count(db.dsn("pyh_app"), None, table) == 0, table
        assert _count(db.dsn("pyh_app"), "globex", table) == globex, table


@pytest.mark.usefixtures("require_age")
def test_raw_cypher_is_off_for_tenant_and_app_roles_and_unlabelled_match_stays_tenant_scoped_for_admins(
        db: Db) -> None:
    # hybrid_user roles read the graph through hybrid.search_graph / graph_context only (SECURITY.md):
    # building a vertex or path needs AGE functions revoked from PUBLIC
    _graph(db)
    vertices = "SELECT * FROM ag_catalog.cypher('hybrid_graph', $$ MATCH (v) RETURN v $$) AS (v ag_catalog.agtype)"
    count = "SELECT count(*) FROM ag_catalog.cypher('hybrid_graph', $$ MATCH (v) RETURN v $$) AS (v ag_catalog.agtype)"
    with psycopg.connect(db.dsn("pyh_acme")) as conn:  # a tenant login role may not even use ag_catalog
        conn.execute("SET search_path = ag_catalog, public")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(count)
    with psycopg.connect(db.dsn("pyh_app")) as conn:
        conn.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        conn.execute("SET search_path = ag_catalog, public")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(vertices)
        conn.rollback()
        conn.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        # a MATCH that builds nothing still reads the label tables, under RLS: acme's 3 vertices only
        assert conn.execute(count).fetchone() == (3,)
    with psycopg.connect(db.dsn()) as conn:  # the superuser bypasses RLS and sees both tenants' vertices
        conn.execute("LOAD 'age'")
        conn.execute("SET search_path = ag_catalog, public")
        assert conn.execute(count).fetchone() == (5,)


@pytest.mark.usefixtures("require_age")
def test_tenant_cannot_write_into_another_tenants_graph(db: Db) -> None:
    _graph(db)
    with psycopg.connect(db.dsn("pyh_acme")) as conn:
        conn.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("""INSERT INTO hybrid_graph."Chunk" (properties)
                            VALUES ('{"node_id": "evil", "tenant_id": "globex"}'::ag_catalog.agtype)""")
