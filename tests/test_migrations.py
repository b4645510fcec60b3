"""Alembic: upgrade on an empty database, downgrade to base, upgrade again; upgraded == fresh."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import psycopg
import pytest
from psycopg import conninfo

from pyhybrid import migrate
from pyhybrid.errors import SchemaError

pytestmark = pytest.mark.slow  # servers, binaries or releases of its own: the full tier only

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
    "rls": """SELECT c.oid::regclass::text, c.relrowsecurity, c.relforcerowsecurity,
                  (SELECT array_agg(a::text ORDER BY a::text) FROM unnest(c.relacl) a)::text FROM pg_class c
              WHERE c.relnamespace IN ('hybrid'::regnamespace, 'hybrid_graph'::regnamespace) AND c.relkind IN ('r', 'p')
              ORDER BY 1""",
    "functions": """SELECT p.oid::regprocedure::text, md5(p.prosrc), p.provolatile, p.prosecdef, p.proconfig::text,
                           p.proowner::regrole::text,
                           (SELECT array_agg(a::text ORDER BY a::text) FROM unnest(p.proacl) a)::text, obj_description(p.oid, 'pg_proc')
                    FROM pg_proc p WHERE p.pronamespace = 'hybrid'::regnamespace
                       OR (p.pronamespace = 'public'::regnamespace AND p.proname = 'hybrid_retrieve') ORDER BY 1""",
    "settings": "SELECT key, value FROM hybrid.setting ORDER BY 1",
    "storage": """SELECT c.oid::regclass::text, c.reloptions::text,
                         (SELECT string_agg(a.attname || ':' || a.attstorage::text, ',' ORDER BY a.attnum) FROM pg_attribute a
                          WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
                  FROM pg_class c WHERE c.relnamespace = 'hybrid'::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1""",
}


def fingerprint(dsn: str) -> dict[str, list[tuple]]:
    with psycopg.connect(dsn) as c:
        return {k: c.execute(q).fetchall() for k, q in FINGERPRINT.items()}  # type: ignore[arg-type]


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


def test_down_and_up_one_revision_with_one_release_leaves_a_fresh_install(empty_db: str, template_db: str) -> None:
    # the head revision drops a function sql/idempotent/ re-creates: the upgrade back re-applies it, though the
    # digest of sql/idempotent/ is the one recorded
    migrate.upgrade(empty_db)
    fresh = fingerprint(empty_db)
    head = migrate.head_revision()
    migrate.downgrade(empty_db, revision=f"{int(head) - 1:04d}")
    migrate.upgrade(empty_db)
    assert fingerprint(empty_db) == fresh


def test_revision_0027_rescales_stored_abstention_floors_both_ways(empty_db: str) -> None:
    # a floor was the best hit's (0.73 x the neighbour median); from 0027 it is the ten best hits' mean's (0.60 x)
    migrate.upgrade(empty_db)
    floor_sql = "SELECT tenant_id, abstain_floor FROM hybrid.tenant ORDER BY 1"
    with psycopg.connect(empty_db, autocommit=True) as c:
        c.execute("SELECT hybrid.create_tenant('acme'), hybrid.create_tenant('globex')")
        c.execute("UPDATE hybrid.tenant SET abstain_floor = 0.6 WHERE tenant_id = 'acme'")
    migrate.downgrade(empty_db, revision="0026")
    with psycopg.connect(empty_db) as c:
        assert c.execute(floor_sql).fetchall() == [("acme", pytest.approx(0.73)), ("globex", None)]
    migrate.upgrade(empty_db)
    with psycopg.connect(empty_db) as c:
        assert c.execute(floor_sql).fetchall() == [("acme", pytest.approx(0.6)), ("globex", None)]


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

    with pytest.raises(InvalidParameterError, match="dim must be between 1 and 16000"):
        migrate.upgrade(empty_db, dim=16001)


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


FIXTURE_0_1_0 = Path(__file__).resolve().parent / "fixtures" / "schema_0_1_0" / "sql"
FIXTURE_0_2_0 = Path(__file__).resolve().parent / "fixtures" / "schema_0_2_0" / "sql"
FINGERPRINT["types"] = """SELECT t.oid::regtype::text, obj_description(t.oid, 'pg_type'),
                                 (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', '
                                                    ORDER BY a.attnum)
                                  FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0)
                          FROM pg_type t JOIN pg_class c ON c.oid = t.typrelid
                          WHERE t.typnamespace = 'hybrid'::regnamespace AND c.relkind = 'c' ORDER BY 1"""
FINGERPRINT["comments"] = """SELECT c.oid::regclass::text, a.attname, col_description(c.oid, a.attnum), obj_description(c.oid, 'pg_class')
                             FROM pg_class c LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                             WHERE c.relnamespace = 'hybrid'::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1, 2"""
FINGERPRINT["schema"] = "SELECT obj_description('hybrid'::regnamespace, 'pg_namespace')"


def install_frozen(dsn: str, root: Path, incremental: list[str], optional: dict[str, str], stamp: str,
                   settings: dict[str, str] | None = None) -> None:
    """A database as a released pyhybrid left it: its frozen sql/ tree (root) applied the way that
    release's revisions applied it (incremental files, then the optional part for each available
    extension, then sql/idempotent/ in order), stamped with its last Alembic revision."""
    with psycopg.connect(dsn) as c:
        def run(*parts: str) -> None:
            c.execute(root.joinpath(*parts).read_text(encoding="utf-8"))  # type: ignore[arg-type]

        available = {r[0] for r in c.execute("SELECT name FROM pg_available_extensions").fetchall()}
        c.execute("SELECT set_config('hybrid.install_dim', '384', true)")
        for name in incremental:
            run("incremental", name)
        for extension, name in optional.items():
            if extension in available:
                run("optional", name)
        for path in sorted(root.joinpath("idempotent").glob("*.sql")):
            run("idempotent", path.name)
        for key, value in (settings or {}).items():
            c.execute("INSERT INTO hybrid.setting (key, value) VALUES (%s, %s) "
                      "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))
        c.execute("CREATE TABLE alembic_version (version_num varchar(32) NOT NULL "
                  "CONSTRAINT alembic_version_pkc PRIMARY KEY)")
        c.execute("INSERT INTO alembic_version VALUES (%s)", (stamp,))


def install_0_1_0(dsn: str) -> None:
    """pyhybrid 0.1.0: its revision 0001, run with its own SQL, stamped 0001."""
    install_frozen(dsn, FIXTURE_0_1_0, ["0001_schema.sql"],
                   {"pg_textsearch": "bm25_0001_index.sql", "age": "age_0001_graph.sql"}, "0001")


def install_0_2_0(dsn: str) -> None:
    """pyhybrid 0.2.0 (0974c6e): revisions 0001 to 0003 with their SQL, then what its finish_upgrade
    ran (the optional parts, sql/idempotent/, the digest and version settings), stamped 0003."""
    install_frozen(dsn, FIXTURE_0_2_0, ["0001_schema.sql", "0002_contract.sql", "0003_content_hash.sql"],
                   {"pg_textsearch": "bm25_index.sql", "age": "age_graph.sql"}, "0003",
                   {"sql_digest": "frozen 0.2.0", "version": "0.2.0"})


def load_sample(dsn: str) -> None:
    from pyhybrid import Chunk, HybridClient
    from tests.helpers import chunks

    with psycopg.connect(dsn, autocommit=True) as c:
        # partitions of their own, as a release before pools gave every tenant
        if c.execute("SELECT to_regprocedure('hybrid.create_tenant(text, text, text)') IS NOT NULL").fetchone()[0]:
            c.execute("SELECT hybrid.create_tenant('acme', NULL, 'dedicated'), hybrid.create_tenant('globex', NULL, 'dedicated')")
        else:
            c.execute("SELECT hybrid.create_tenant('acme'), hybrid.create_tenant('globex')")
        c.execute("SELECT hybrid.grant_app('pyh_app')")
        c.execute("SELECT hybrid.grant_tenant('pyh_acme', 'acme', ARRAY['quality'])")
    app = conninfo.make_conninfo(dsn, user="pyh_app", password="pyh_app")
    with HybridClient(app) as client:
        with client.tenant("acme") as t:
            t.ingest(chunks("a", 40, doc_size=4, seed=1))
            t.ingest([Chunk(chunk_id="q", document_id="Q", content="restricted pump alarm note",
                            acl_labels=["quality"])], allow_missing_embeddings=True)
            t.add_edges([{"src": "a-1", "dst": "a-7", "rel": "VERIFIES"},
                         {"src": "a-7", "dst": "acme:entity:pump", "rel": "MENTIONS"}])
        with client.tenant("globex") as t:
            t.ingest(chunks("g", 20, seed=2))


def results(dsn: str, extra: str = "") -> list[tuple]:
    """Three hybrid_retrieve calls as a tenant role; extra: more arguments (0.3's default fusion is convex:
    after an upgrade, fusion => 'rrf' gives 0.1's answers)."""
    from tests.helpers import unit

    out: list[tuple] = []
    with psycopg.connect(conninfo.make_conninfo(dsn, user="pyh_acme", password="pyh_acme")) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        for args, params in (("query_text => 'pumps alarms item3'", None),
                             ("query_embedding => %s::vector, query_text => 'valves item7'",
                              ("[" + ",".join(map(str, unit(100007).tolist())) + "]",)),
                             ("graph_seeds => ARRAY['a-1']", None)):
            out += c.execute(f"SELECT chunk_id, score, vector_rank, keyword_rank, graph_rank FROM hybrid_retrieve({args}{extra})",
                             params).fetchall()
    return out


def edges(dsn: str) -> list[tuple]:
    """Every edge as (tenant, src, dst, type, properties): the type from its label's name before 0.3, from
    the tenant's hybrid.edge_type after (revision 0008)."""
    with psycopg.connect(dsn) as c:
        typed = c.execute("SELECT to_regclass('hybrid.edge_type') IS NOT NULL").fetchone() == (True,)
        rel = ("(SELECT et.name FROM hybrid.edge_type et WHERE et.tenant_id = a.tenant_id "
               "AND l.relname = 'rel_' || et.slot)") if typed else "l.relname::text"
        return c.execute(
            f"SELECT a.tenant_id, a.node_id, b.node_id, {rel}, e.properties::text FROM hybrid_graph._ag_label_edge e "
            "JOIN hybrid.graph_node a ON a.vertex_id OPERATOR(ag_catalog.=) e.start_id "
            "JOIN hybrid.graph_node b ON b.vertex_id OPERATOR(ag_catalog.=) e.end_id "
            "JOIN pg_class l ON l.oid = e.tableoid ORDER BY 1, 2, 3, 4").fetchall()


def counts(dsn: str) -> tuple:
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT (SELECT count(*) FROM hybrid.tenant), (SELECT count(*) FROM hybrid.tenant_grant), "
                         "(SELECT count(*) FROM hybrid.chunk), (SELECT count(*) FROM hybrid.graph_node), "
                         "(SELECT count(*) FROM hybrid_graph._ag_label_edge), "
                         "(SELECT string_agg(md5(content), ',' ORDER BY chunk_id) FROM hybrid.chunk)").fetchone()  # type: ignore[return-value]


@pytest.mark.usefixtures("require_age", "require_bm25")
@pytest.mark.parametrize("release", ["0.1.0", "0.2.0"])
def test_a_released_database_with_data_upgraded_to_head_equals_a_fresh_install_and_keeps_every_row(
        admin_dsn: str, template_db: str, release: str) -> None:
    names = [f"pyh_m_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        for n in names:
            c.execute(f'CREATE DATABASE "{n}"')
    old, fresh = (conninfo.make_conninfo(admin_dsn, dbname=n) for n in names)
    try:
        {"0.1.0": install_0_1_0, "0.2.0": install_0_2_0}[release](old)
        load_sample(old)
        before_counts, before_results, before_edges = counts(old), results(old), edges(old)
        assert before_results and before_counts[2] == 61 and len(before_edges) == 2
        migrate.upgrade(old)
        migrate.upgrade(fresh)
        load_sample(fresh)  # the same edge types, so the same AGE label tables
        assert fingerprint(old) == fingerprint(fresh)
        assert counts(old) == before_counts
        assert edges(old) == before_edges  # under the tenant's opaque labels now (revision 0008)
        after = results(old, ", fusion => 'rrf'")
        # the same rows and ranks; a row the graph alone found scores from its seed since 0.4 (graph_decay)
        assert [r[:1] + r[2:] for r in after] == [r[:1] + r[2:] for r in before_results]
        assert [r for r in after if r[4] is None] == [r for r in before_results if r[4] is None]
        with psycopg.connect(old) as c:
            assert c.execute("SELECT version_num FROM alembic_version").fetchone() == (migrate.head_revision(),)
            # 0.1's client-side hashes were recomputed: re-ingesting the same chunks changes nothing
            assert c.execute("SELECT count(*) FROM hybrid.chunk WHERE content_hash <> hybrid.content_hash("
                             "document_id, position, content, acl_labels, metadata, corpus_id)").fetchone() == (0,)
            assert c.execute("SELECT hybrid.version()").fetchone() == (pyhybrid_version(),)
            # revision 0025 bounded every lexeme's term score from the rows already there (a little looser than a
            # recount: the SQL scorer stays exact)
            assert c.execute(
                "SELECT count(*) FROM hybrid.tenant t CROSS JOIN LATERAL hybrid._bm25_counted(t.tenant_key) n "
                "JOIN hybrid.bm25_term_stats d ON d.tenant_key = t.tenant_key AND d.lexeme = n.lexeme "
                "WHERE d.max_tf IS DISTINCT FROM n.max_tf OR NOT d.min_dl_tf <= n.min_dl_tf").fetchone() == (0,)
        assert_reingest_changes_nothing(old)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as c:
            for n in names:
                c.execute(f'DROP DATABASE IF EXISTS "{n}" WITH (FORCE)')


def assert_reingest_changes_nothing(dsn: str) -> None:
    from pyhybrid import HybridClient
    from tests.helpers import chunks

    with HybridClient(conninfo.make_conninfo(dsn, user="pyh_app", password="pyh_app")) as client:
        with client.tenant("acme") as t:
            res = t.ingest(chunks("a", 40, doc_size=4, seed=1))
    assert (res.inserted, res.updated, res.unchanged) == (0, 0, 40)


def pyhybrid_version() -> str:
    from pyhybrid import __version__

    return __version__


def test_an_upgrade_with_nothing_changed_re_applies_nothing(empty_db: str) -> None:
    migrate.upgrade(empty_db)
    with psycopg.connect(empty_db) as c:
        before = c.execute("SELECT xmin::text FROM pg_proc WHERE oid = 'hybrid.retrieve'::regproc").fetchone()
    migrate.upgrade(empty_db)
    with psycopg.connect(empty_db) as c:
        # a re-created function gets a new row version; an untouched one keeps it
        assert c.execute("SELECT xmin::text FROM pg_proc WHERE oid = 'hybrid.retrieve'::regproc").fetchone() == before
    migrate.upgrade(empty_db, reapply=True)
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT xmin::text FROM pg_proc WHERE oid = 'hybrid.retrieve'::regproc").fetchone() != before


@pytest.mark.usefixtures("require_age", "require_bm25")
def test_optional_parts_missing_at_install_are_installed_by_the_next_migrate(empty_db: str) -> None:
    # as on a server that gained AGE and pg_textsearch after the first migrate
    migrate.upgrade(empty_db)
    with psycopg.connect(empty_db) as c:
        c.execute("DROP INDEX hybrid.chunk_content_bm25")
        c.execute("SELECT ag_catalog.drop_graph('hybrid_graph', true)")
        c.execute("DROP TABLE hybrid.graph_node")
        c.execute("DELETE FROM hybrid.setting WHERE key = 'graph'")
    migrate.upgrade(empty_db)
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT to_regclass('hybrid.chunk_content_bm25') IS NOT NULL, "
                         "to_regclass('hybrid.graph_node') IS NOT NULL, hybrid.bm25_available()").fetchone() == (
            True, True, True)
        weak = c.execute("SELECT count(*) FROM ag_catalog.ag_label l JOIN pg_class r ON r.oid = l.relation "
                         "WHERE NOT (r.relrowsecurity AND r.relforcerowsecurity)").fetchone()
        assert weak == (0,), "the re-applied SQL secures the new graph's label tables"


@pytest.mark.usefixtures("require_bm25")
def test_an_object_depending_on_the_unpartitioned_table_stops_the_0_2_upgrade_before_anything_changes(
        admin_dsn: str) -> None:
    name = f"pyh_m_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    dsn = conninfo.make_conninfo(admin_dsn, dbname=name)
    try:
        install_0_2_0(dsn)
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("CREATE VIEW public.my_docs AS SELECT tenant_id, document_id FROM hybrid.chunk")
            c.execute("CREATE TABLE public.notes (id int, body text)")
            c.execute("ALTER TABLE public.notes ENABLE ROW LEVEL SECURITY")
            c.execute("CREATE POLICY notes_by_chunk ON public.notes USING "
                      "(EXISTS (SELECT 1 FROM hybrid.chunk c WHERE c.chunk_id = body))")
        with pytest.raises(SchemaError, match=r"depend on it: policy notes_by_chunk on table notes; view my_docs\. Drop them"):
            migrate.upgrade(dsn)
        with psycopg.connect(dsn) as c:  # refused before the BM25 index was dropped or anything else ran
            assert c.execute("SELECT version_num FROM alembic_version").fetchone() == ("0003",)
            assert c.execute("SELECT to_regclass('hybrid.chunk_content_bm25') IS NOT NULL, "
                             "(SELECT relkind FROM pg_class WHERE oid = 'hybrid.chunk'::regclass)").fetchone() == (True, "r")
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("DROP VIEW public.my_docs")
            c.execute("DROP POLICY notes_by_chunk ON public.notes")
        migrate.upgrade(dsn)
        with psycopg.connect(dsn) as c:
            assert c.execute("SELECT version_num FROM alembic_version").fetchone() == (migrate.head_revision(),)
            assert c.execute("SELECT relkind FROM pg_class WHERE oid = 'hybrid.chunk'::regclass").fetchone() == ("p",)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
