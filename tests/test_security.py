"""Attacks through the extensions, as a tenant login role (pyh_acme) and as an app role acting for acme.

globex holds the secret. Each attempt must be refused (42501) or return nothing of globex, and never
take the server down. The rest of the threat model is in SECURITY.md.
"""

from __future__ import annotations

import psycopg
import pytest

from pyhybrid import Chunk, HybridClient
from tests.conftest import Db
from tests.helpers import chunks

ATTACKERS = ["pyh_acme", "pyh_app"]


def _secret_graph(db: Db) -> int:
    """globex: chunks linked to a secret entity; acme: a chunk with a restricted neighbour. Returns a globex vertex id."""
    with HybridClient(db.dsn("pyh_app")) as c:
        with c.tenant("globex") as t:
            t.ingest(chunks("g", 3, seed=7))
            t.add_edges([{"src": "g-0", "dst": "g-1", "rel": "SECRET_LINK"},
                         {"src": "g-1", "dst": "globex:entity:project-falcon", "rel": "MENTIONS"}])
        with c.tenant("acme", ["*"]) as t:
            t.ingest(chunks("a", 2, seed=8))
            t.ingest([Chunk(chunk_id="restricted", document_id="R", content="quality audit finding",
                            acl_labels=["quality"])], corpus_id="qms", allow_missing_embeddings=True)
            t.add_edges([{"src": "restricted", "dst": "acme:entity:only-via-restricted", "rel": "MENTIONS"},
                         {"src": "a-0", "dst": "a-1", "rel": "VERIFIES"}])
    with psycopg.connect(db.dsn()) as admin:
        row = admin.execute("SELECT vertex_id::text::bigint FROM hybrid.graph_node "
                            "WHERE tenant_id = 'globex' AND node_id = 'g-0'").fetchone()
    assert row is not None
    return int(row[0])


def _as(db: Db, role: str) -> psycopg.Connection:
    conn = psycopg.connect(db.dsn(role), autocommit=True)
    conn.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
    return conn


def _server_alive(db: Db) -> None:
    with psycopg.connect(db.dsn()) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.usefixtures("require_age")
@pytest.mark.parametrize("role", ATTACKERS)
def test_age_vle_cannot_walk_another_tenants_graph(db: Db, role: str) -> None:
    vid = _secret_graph(db)
    with _as(db, role) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(
            "SELECT ag_catalog.age_materialize_vle_path(p) FROM ag_catalog.age_vle('\"hybrid_graph\"'::ag_catalog.agtype, "
            f"'{{\"id\": {vid}, \"label\": \"\", \"properties\": {{}}}}::vertex'::ag_catalog.agtype, NULL, "
            "'{\"id\": 0, \"label\": \"\", \"start_id\": 0, \"end_id\": 0, \"properties\": {}}::edge'::ag_catalog.agtype, "
            "'1'::ag_catalog.agtype, '3'::ag_catalog.agtype, '0'::ag_catalog.agtype) p")


@pytest.mark.usefixtures("require_age")
@pytest.mark.parametrize("role", ATTACKERS)
def test_cypher_variable_length_match_is_refused(db: Db, role: str) -> None:
    _secret_graph(db)
    with _as(db, role) as conn:
        conn.execute("SET search_path = ag_catalog, public")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM ag_catalog.cypher('hybrid_graph', $$ MATCH p=()-[*1..3]-() RETURN p $$) "
                         "AS (p ag_catalog.agtype)")


@pytest.mark.usefixtures("require_age")
@pytest.mark.parametrize("role", ATTACKERS)
def test_age_vertex_stats_on_a_crafted_id_is_refused_and_the_server_stays_up(db: Db, role: str) -> None:
    _secret_graph(db)
    with _as(db, role) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT ag_catalog.age_vertex_stats('\"hybrid_graph\"'::ag_catalog.agtype, "
                     "'{\"id\": 844424930199999, \"label\": \"\", \"properties\": {}}::vertex'::ag_catalog.agtype)")
    _server_alive(db)


@pytest.mark.usefixtures("require_age")
@pytest.mark.parametrize("function", ["age_vle", "age_vertex_stats", "age_materialize_vle_path",
                                      "_agtype_build_vertex", "age_graph_stats", "create_elabel", "drop_graph"])
def test_no_hybrid_role_may_execute_ages_dangerous_functions(db: Db, function: str) -> None:
    with psycopg.connect(db.dsn()) as c:
        allowed = c.execute(
            "SELECT bool_or(has_function_privilege(r, p.oid, 'EXECUTE')) FROM pg_proc p, "
            "unnest(ARRAY['pyh_acme', 'pyh_app', 'pyh_nobody']) r "
            "WHERE p.pronamespace = 'ag_catalog'::regnamespace AND p.proname = %s", (function,)).fetchone()
    assert allowed == (False,), function


@pytest.mark.usefixtures("require_bm25")
@pytest.mark.parametrize("role", ATTACKERS)
@pytest.mark.parametrize("call", ["bm25_dump_index('hybrid.chunk_content_bm25')",
                                  "bm25_summarize_index('hybrid.chunk_content_bm25')",
                                  "bm25_spill_index('hybrid.chunk_content_bm25')",
                                  "bm25_force_merge('hybrid.chunk_content_bm25')"])
def test_bm25_index_internals_are_refused(db: Db, role: str, call: str) -> None:
    _secret_graph(db)
    with _as(db, role) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(f"SELECT {call}")


@pytest.mark.usefixtures("require_age")
@pytest.mark.parametrize("role", ATTACKERS)
def test_graph_context_of_a_restricted_chunk_shows_nothing_without_its_label(db: Db, role: str) -> None:
    _secret_graph(db)
    with _as(db, role) as conn:
        if role == "pyh_acme":  # a tenant role claims no label unless it sets hybrid.acl_labels
            conn.execute("SELECT set_config('hybrid.acl_labels', 'none-held', false)")
        assert conn.execute("SELECT * FROM hybrid.graph_context(ARRAY['restricted'])").fetchall() == []
        conn.execute("SELECT set_config('hybrid.acl_labels', 'quality', false)")
        rows = conn.execute("SELECT context FROM hybrid.graph_context(ARRAY['restricted'])").fetchall()
    assert [c["node_id"] for c in rows[0][0]] == ["acme:entity:only-via-restricted"]


@pytest.mark.usefixtures("require_age")
def test_graph_retrieval_still_works_for_the_tenant_after_the_revokes(db: Db) -> None:
    _secret_graph(db)
    with _as(db, "pyh_acme") as conn:
        rows = conn.execute("SELECT chunk_id FROM hybrid_retrieve(graph_seeds => ARRAY['a-0'])").fetchall()
        ctx = conn.execute("SELECT context FROM hybrid.graph_context(ARRAY['a-0'])").fetchall()
    assert rows == [("a-1",)]
    assert [c["node_id"] for c in ctx[0][0]] == ["a-1"]


@pytest.mark.usefixtures("require_age")
def test_a_tenant_cannot_insert_a_bridge_edge_to_another_tenants_vertices(db: Db) -> None:
    _secret_graph(db)
    with psycopg.connect(db.dsn()) as admin:
        g0, g1 = (r[0] for r in admin.execute("SELECT vertex_id::text FROM hybrid.graph_node WHERE tenant_id = "
                                               "'globex' AND node_id IN ('g-0', 'g-1') ORDER BY node_id").fetchall())
    for role in ATTACKERS:
        with _as(db, role) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"""INSERT INTO hybrid_graph.rel_0 (start_id, end_id, properties)
                             VALUES ('{g0}'::ag_catalog.graphid, '{g1}'::ag_catalog.graphid,
                                     '{{"tenant_id": "acme"}}'::ag_catalog.agtype)""")


@pytest.mark.usefixtures("require_age")
@pytest.mark.parametrize("role", ATTACKERS)
def test_a_tenant_cannot_draw_or_squat_vertex_ids(db: Db, role: str) -> None:
    _secret_graph(db)
    with _as(db, role) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("""SELECT nextval('hybrid_graph."Entity_id_seq"')""")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO hybrid.graph_node (tenant_id, node_id, kind, vertex_id) "
                         "VALUES ('acme', 'squat', 'entity', '844424930131999'::ag_catalog.graphid)")
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("globex") as t:  # globex's next vertices load fine
        assert t.add_edges([{"src": "g-2", "dst": "globex:entity:new", "rel": "MENTIONS"}]).edges_added == 1


@pytest.mark.usefixtures("require_age")
def test_a_tenant_login_role_loads_its_own_edge_types_which_no_other_tenant_sees(db: Db) -> None:
    _secret_graph(db)
    with HybridClient(db.dsn("pyh_acme_writer")) as c, c.tenant("acme") as t:
        assert t.add_edges([{"src": "a-0", "dst": "a-1", "rel": "ATTACKER_TYPE_1"}]).edges_added == 1
    with psycopg.connect(db.dsn()) as admin:
        assert admin.execute("SELECT tenant_id, name, slot FROM hybrid.edge_type WHERE name = 'ATTACKER_TYPE_1'"
                             ).fetchall() == [("acme", "ATTACKER_TYPE_1", 2)]
        assert admin.execute("SELECT count(*) FROM ag_catalog.ag_label WHERE name = 'ATTACKER_TYPE_1'").fetchone() == (0,)
    with _as(db, "pyh_globex") as conn:
        conn.execute("SELECT set_config('hybrid.tenant_id', 'globex', false)")
        assert conn.execute("SELECT name FROM hybrid.edge_types()").fetchall() == [("MENTIONS",), ("SECRET_LINK",)]


@pytest.mark.usefixtures("require_age")
@pytest.mark.parametrize("trap", [
    "CREATE TEMP TABLE hybrid_edge_stage (ord bigserial, src text, dst text, rel text, properties jsonb); "
    "CREATE FUNCTION pg_temp.evil() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$; "
    "CREATE TRIGGER t BEFORE TRUNCATE ON pg_temp.hybrid_edge_stage FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.evil()",
    "CREATE TEMP VIEW hybrid_edge_stage AS SELECT 1::bigint AS ord, 'a-0'::text AS src, 'a-1'::text AS dst, "
    "'VERIFIES'::text AS rel, '{}'::jsonb AS properties",
    "CREATE TEMP TABLE hybrid_edge_stage (ord bigserial, src text, dst text, rel text, properties jsonb); "
    "ALTER TABLE pg_temp.hybrid_edge_stage ENABLE ROW LEVEL SECURITY",
])
def test_the_definer_refuses_a_staging_table_the_caller_rigged(db: Db, trap: str) -> None:
    _secret_graph(db)
    with psycopg.connect(db.dsn("pyh_acme_writer")) as conn:
        conn.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        conn.execute(trap)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not the staging table"):
            conn.execute("SELECT * FROM hybrid.finish_edges()")


@pytest.mark.usefixtures("require_age")
def test_graph_writes_act_for_the_caller_after_set_role_from_an_authenticator(db: Db) -> None:
    _secret_graph(db)
    with psycopg.connect(db.dsn()) as c:  # an authenticator that switches to the tenant role
        c.execute("SET ROLE pyh_acme_writer")
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', true)")
        c.execute("SELECT hybrid.begin_edges()")
        c.execute("INSERT INTO pg_temp.hybrid_edge_stage (src, dst, rel) VALUES ('a-0', 'acme:entity:x', 'MENTIONS')")
        assert c.execute("SELECT edges_added FROM hybrid.finish_edges()").fetchone() == (1,)
        c.execute("SELECT set_config('hybrid.tenant_id', 'globex', true)")  # not granted to pyh_acme_writer
        c.execute("SELECT hybrid.begin_edges()")
        c.execute("INSERT INTO pg_temp.hybrid_edge_stage (src, dst, rel) VALUES ('g-0', 'x', 'MENTIONS')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="no tenant"):
            c.execute("SELECT * FROM hybrid.finish_edges()")


@pytest.mark.parametrize("role", ATTACKERS)
@pytest.mark.parametrize("statement", [
    "LOCK TABLE hybrid.chunk IN ACCESS EXCLUSIVE MODE",
    "LOCK TABLE hybrid.corpus IN SHARE ROW EXCLUSIVE MODE",
    "UPDATE hybrid.chunk SET content = 'x'",
    "DELETE FROM hybrid.chunk",
    "TRUNCATE hybrid.chunk",
    "INSERT INTO hybrid.corpus (tenant_id, corpus_id) VALUES ('acme', 'direct')",
])
def test_a_tenant_cannot_write_or_lock_the_shared_tables(db: Db, role: str, statement: str) -> None:
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
        t.ingest(chunks("a", 2, seed=8))
    with _as(db, role) as conn:
        conn.execute("BEGIN")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)
        conn.execute("ROLLBACK")
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:  # the API still writes
        assert t.delete_document("a-doc-0") == 1


@pytest.mark.parametrize("trap", [
    "CREATE TEMP TABLE hybrid_chunk_stage (ord bigserial, tenant_id text, chunk_id text, document_id text, "
    "position integer, content text, embedding real[], acl_labels text[], metadata jsonb); "
    "CREATE FUNCTION pg_temp.evil() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$; "
    "CREATE TRIGGER t BEFORE TRUNCATE ON pg_temp.hybrid_chunk_stage FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.evil()",
    "CREATE TEMP VIEW hybrid_chunk_stage AS SELECT 1::bigint AS ord, NULL::text AS tenant_id, 'x'::text AS chunk_id, "
    "'d'::text AS document_id, 0 AS position, 'c'::text AS content, NULL::real[] AS embedding, "
    "NULL::text[] AS acl_labels, NULL::jsonb AS metadata",
])
def test_the_ingest_definer_refuses_a_staging_table_the_caller_rigged(db: Db, trap: str) -> None:
    with psycopg.connect(db.dsn("pyh_acme_writer")) as conn:
        conn.execute(trap)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not the staging table"):
            conn.execute("SELECT * FROM hybrid.finish_ingest('qms')")


@pytest.mark.usefixtures("require_bm25")
@pytest.mark.parametrize("role", ATTACKERS)
@pytest.mark.parametrize("probe", [
    "CREATE TEMP TABLE p (c text); INSERT INTO p VALUES ('falcon'); "
    "SELECT c <@> to_bm25query(c, 'hybrid.chunk_content_bm25') FROM p",
    "CREATE TEMP TABLE p (c text); INSERT INTO p VALUES ('falcon'); "
    "SELECT c <@> 'hybrid.chunk_content_bm25:falcon'::bm25query FROM p",
    "SELECT bm25_text_text_score('falcon', 'falcon')",
])
def test_the_bm25_word_oracle_is_closed(db: Db, role: str, probe: str) -> None:
    # globex holds a word; scoring any text against the shared index would reveal whether it occurs
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("globex") as t:
        t.ingest([Chunk(chunk_id=f"s{i}", document_id=f"s{i}", content="project falcon launch plan")
                  for i in range(5)], allow_missing_embeddings=True)
    # refused by privilege, or (the cast form, where to_bm25query is not called) by pg_textsearch's own
    # rule that the index must be on the scored column: either way no score comes back
    with _as(db, role) as conn, pytest.raises((psycopg.errors.InsufficientPrivilege, psycopg.errors.WrongObjectType)):
        conn.execute(probe)


def test_a_tenant_login_role_cannot_explain_its_way_around_rls(db: Db) -> None:
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("globex") as t:
        t.ingest([Chunk(chunk_id=f"s{i}", document_id=f"s{i}", content="project falcon launch plan")
                  for i in range(5)], allow_missing_embeddings=True)
    with _as(db, "pyh_acme") as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("EXPLAIN ANALYZE SELECT * FROM hybrid.chunk WHERE tsv @@ 'falcon'::tsquery")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN ANALYZE SELECT * FROM hybrid_retrieve(query_text => 'falcon')").fetchall())
    assert "Function Scan" in plan and "Rows Removed" not in plan


GRAPH_TABLE_READS = [
    ("graph_node", "SELECT node_id FROM hybrid.graph_node WHERE vertex_id::text::bigint = %(v)s"),
    ("Chunk vertices", 'SELECT id::text FROM hybrid_graph."Chunk" WHERE id::text::bigint = %(v)s'),
    ("all vertices", "SELECT id::text FROM hybrid_graph._ag_label_vertex WHERE id::text::bigint = %(v)s"),
    ("MENTIONS edges", "SELECT id::text FROM hybrid_graph.rel_0 "  # acme's first type, MENTIONS
                       "WHERE start_id::text::bigint = %(v)s OR end_id::text::bigint = %(v)s"),
    ("all edges", "SELECT id::text FROM hybrid_graph._ag_label_edge "
                  "WHERE start_id::text::bigint = %(v)s OR end_id::text::bigint = %(v)s"),
]


@pytest.mark.usefixtures("require_age")
@pytest.mark.parametrize("what,query", GRAPH_TABLE_READS, ids=[w for w, _ in GRAPH_TABLE_READS])
def test_an_app_role_reading_the_graph_tables_sees_a_restricted_chunk_only_with_its_label(
        db: Db, what: str, query: str) -> None:
    # finding 9 for the trusted app role: a chunk's ACL labels apply to its node, vertex and edges
    _secret_graph(db)
    with psycopg.connect(db.dsn()) as admin:
        row = admin.execute("SELECT vertex_id::text::bigint FROM hybrid.graph_node "
                            "WHERE tenant_id = 'acme' AND node_id = 'restricted'").fetchone()
    assert row is not None
    with _as(db, "pyh_app") as conn:
        assert conn.execute(query, {"v": row[0]}).fetchall() == [], what
        conn.execute("SELECT set_config('hybrid.acl_labels', 'quality', false)")
        assert len(conn.execute(query, {"v": row[0]}).fetchall()) == 1, what
        # the entity only the restricted chunk links to is still a node of the tenant's
        conn.execute("SELECT set_config('hybrid.acl_labels', '', false)")
        assert conn.execute("SELECT count(*) FROM hybrid.graph_node WHERE node_id = 'a-0'").fetchone() == (1,)


@pytest.mark.usefixtures("require_age")
def test_an_app_role_cypher_match_on_a_restricted_chunk_finds_nothing_without_its_label(db: Db) -> None:
    # once this test caught the refusal of a MATCH that builds vertices and compared [] with []: a MATCH
    # that builds nothing runs for app roles, under RLS, and must count the restricted chunk's edge only
    # with its label (acme's MENTIONS edge from "restricted" to the entity, and a-0 -VERIFIES-> a-1)
    _secret_graph(db)
    count = ("SELECT count(*) FROM ag_catalog.cypher('hybrid_graph', $$ MATCH (c)-[e]->(n) RETURN e $$) "
             "AS (e ag_catalog.agtype)")
    with _as(db, "pyh_app") as conn:
        conn.execute("SET search_path = ag_catalog, public")
        assert conn.execute(count).fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM ag_catalog.cypher('hybrid_graph', $$ MATCH (n:Entity) RETURN n $$) "
                            "AS (n ag_catalog.agtype)").fetchone() == (0,)
        conn.execute("SELECT set_config('hybrid.acl_labels', 'quality', false)")
        assert conn.execute(count).fetchone() == (2,)


def test_errors_raised_inside_the_definer_functions_relay_nothing_of_another_tenant(db: Db) -> None:
    # globex owns chunk "dup"; acme writing the same chunk id, deleting it, or asking for its graph
    # context gets its own result, never a unique violation or a message carrying globex's values
    with HybridClient(db.dsn("pyh_app")) as c:
        with c.tenant("globex") as t:
            t.ingest([Chunk(chunk_id="dup", document_id="D", content="globex falcon secret")], allow_missing_embeddings=True)
        with c.tenant("acme") as t:
            t.ingest([Chunk(chunk_id="dup", document_id="D", content="acme own text")], allow_missing_embeddings=True)
            rows = t.retrieve(query_text="falcon secret own text")
    assert [r.chunk_id for r in rows] == ["dup"]
    with _as(db, "pyh_acme_writer") as conn:
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
        conn.execute("SELECT * FROM hybrid_retrieve(query_text => 'falcon secret')").fetchall()
        assert conn.execute("SELECT content FROM hybrid_retrieve(query_text => 'acme own')").fetchall() == [("acme own text",)]
        assert conn.execute("SELECT hybrid.delete_document('D')").fetchone() == (1,)  # acme's own D
    with psycopg.connect(db.dsn()) as admin:
        assert admin.execute("SELECT content FROM hybrid.chunk WHERE tenant_id = 'globex'").fetchall() == [
            ("globex falcon secret",)]
    assert not any("globex" in n or "falcon" in n for n in notices)


def test_no_catalog_name_a_tenant_can_read_carries_a_tenant_id(db: Db) -> None:
    # pg_class, pg_namespace, ag_label, pg_roles' settings and pg_stat_user_tables are readable by every
    # role: none of their names may hold a tenant id (ids are data, seen only through RLS)
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("globex") as t:
        t.ingest(chunks("g", 3, seed=7))
    with _as(db, "pyh_acme") as conn:
        names = [r[0] for r in conn.execute(
            "SELECT relname::text FROM pg_class UNION ALL SELECT nspname::text FROM pg_namespace "
            "UNION ALL SELECT relname::text FROM pg_stat_user_tables "
            "UNION ALL SELECT conname::text FROM pg_constraint UNION ALL SELECT polname::text FROM pg_policy "
            "UNION ALL SELECT datname::text FROM pg_database").fetchall()]
        if conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'age'").fetchone() == (1,):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT name FROM ag_catalog.ag_label")
    assert not [n for n in names if "globex" in n.lower() or "acme" in n.lower()]
