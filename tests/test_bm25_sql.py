"""BM25 on any PostgreSQL: the per-tenant statistics hybrid.chunk's triggers keep, and the SQL scorer that ranks
by them with pg_textsearch's own arithmetic (sql/idempotent/046_bm25_stats.sql, hybrid._bm25_sql_hits)."""

from __future__ import annotations

import random
import threading
from typing import Any

import psycopg
import psycopg.rows
import pytest

from pyhybrid import Chunk, HybridClient
from pyhybrid.doctor import check
from tests.conftest import Db

# a vocabulary with a few frequent words and a long tail, so that df, lengths and idf vary
WORDS = ("pump valve flow pressure sensor alarm occlusion infusion dose rate battery display motor gear seal "
         "housing cable fuse relay switch filter nozzle tank hose clamp bracket spring lever latch hinge "
         "membrane piston cylinder gasket bearing shaft rotor stator coil magnet").split()
QUERIES = ["pump pressure", "occlusion alarm on the infusion pump", "valve valve", "battery", "rotor stator coil",
           "the and of", "seal's gasket", "unknownword pump", "pump pump pump", "flow rate dose"]


def _corpus(prefix: str, n: int, seed: int) -> list[Chunk]:
    """n documents of 3 to 120 words drawn Zipf-like from WORDS (lengths past 40 exercise the quantization)."""
    rnd = random.Random(seed)
    weights = [1 / (i + 1) for i in range(len(WORDS))]
    docs = []
    for i in range(n):
        words = rnd.choices(WORDS, weights, k=rnd.choice([3, 8, 20, 45, 70, 120]))
        docs.append(Chunk(chunk_id=f"{prefix}{i}", document_id=f"{prefix}d{i // 2}", position=i % 2,
                          content=" ".join(words) + (" the of and" if i % 3 == 0 else "")))
    return docs


def _ingest(db: Db, tenant: str, docs: list[Chunk], **kw: Any) -> None:
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant(tenant) as t:
        t.ingest(docs, allow_missing_embeddings=True, **kw)


def _sql_scores(db: Db, tenant: str, query: str, k: int = 1000) -> list[tuple[str, float]]:
    """The tenant's BM25 hits by the SQL scorer, as its app role sees them."""
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant(tenant) as t:
        t.conn.execute("SET hybrid.bm25_scorer = sql")
        rows = t.conn.execute("SELECT chunk_id, value FROM hybrid.search_lexical(%s, %s, lexical => 'bm25')",
                              (query, k)).fetchall()
        assert t.conn.execute("SELECT current_setting('hybrid.bm25_scores')").fetchone()["current_setting"] == \
            "SQL scorer: SET hybrid.bm25_scorer = sql"
    return [(r["chunk_id"], float(r["value"])) for r in rows]


def _drift(admin: psycopg.Connection[Any], tenant: str | None = None) -> list[tuple[Any, ...]]:
    return admin.execute("SELECT * FROM hybrid.bm25_stats_drift(%s)", (tenant,)).fetchall()


@pytest.mark.usefixtures("require_bm25")
def test_the_sql_scorer_gives_pg_textsearchs_standalone_scores_to_the_bit(db: Db) -> None:
    _ingest(db, "acme", _corpus("a", 300, seed=1))
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        key = admin.execute("SELECT tenant_key FROM hybrid.tenant WHERE tenant_id = 'acme'").fetchone()[0]
        index = admin.execute("SELECT hybrid._bm25_partition_index(%s)", (key,)).fetchone()[0]
        admin.execute(f"REINDEX INDEX {index}")  # pg_textsearch's statistics, freshly counted from the same rows
        for q in QUERIES:
            want = {cid: -raw for cid, raw in admin.execute(
                f"SELECT chunk_id, content <@> to_bm25query(%s, %s) FROM hybrid.chunk_p{key}", (q, index)).fetchall()
                if raw < 0}
            got = dict(_sql_scores(db, "acme", q))
            assert got == want, q  # every matching row, every score equal as float8
    assert len(_sql_scores(db, "acme", "pump")) > 100


@pytest.mark.usefixtures("require_bm25")
def test_the_sql_scorer_ranks_as_the_bm25_index_scan(db: Db) -> None:
    _ingest(db, "acme", _corpus("a", 300, seed=2))
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        admin.execute("SELECT hybrid.heal_bm25()")
        key = admin.execute("SELECT tenant_key FROM hybrid.tenant WHERE tenant_id = 'acme'").fetchone()[0]
        admin.execute(f"REINDEX INDEX {admin.execute('SELECT hybrid._bm25_partition_index(%s)', (key,)).fetchone()[0]}")
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
        for q in QUERIES:
            index = [(r["chunk_id"], float(r["value"])) for r in t.conn.execute(
                "SELECT chunk_id, value FROM hybrid.search_lexical(%s, 10, lexical => 'bm25')", (q,)).fetchall()]
            sql = _sql_scores(db, "acme", q, 10)
            assert [cid for cid, _ in sql] == [cid for cid, _ in index] or \
                [round(v, 4) for _, v in sql] == [round(v, 4) for _, v in index], q  # ties may order otherwise
            assert all(abs(a - b) <= 1e-6 * abs(b) for (_, a), (_, b) in zip(sql, index)), q  # float4 rounding


def _unbounded(admin: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """The lexemes whose kept term-score bounds (max_tf, min_dl_tf) do not bound their counted rows."""
    return admin.execute(
        "SELECT t.tenant_id, c.lexeme, d.max_tf, c.max_tf, d.min_dl_tf, c.min_dl_tf "
        "FROM hybrid.tenant t CROSS JOIN LATERAL hybrid._bm25_counted(t.tenant_key) c "
        "LEFT JOIN hybrid.bm25_term_stats d ON d.tenant_key = t.tenant_key AND d.lexeme = c.lexeme "
        "WHERE c.lexeme IS NOT NULL AND (d.max_tf IS NULL OR d.max_tf < c.max_tf OR d.min_dl_tf > c.min_dl_tf)"
    ).fetchall()


def test_statistics_follow_ingest_reingest_supersede_delete_prune_and_drop(db: Db) -> None:
    docs = _corpus("a", 80, seed=3)
    _ingest(db, "acme", docs)
    _ingest(db, "globex", _corpus("g", 30, seed=4))
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        assert _drift(admin) == [] and _unbounded(admin) == []
        n = admin.execute("SELECT s.n_docs FROM hybrid.bm25_tenant_stats s JOIN hybrid.tenant t USING (tenant_key) "
                          "WHERE t.tenant_id = 'acme'").fetchone()[0]
        assert n == 80
        # re-ingest: changed texts supersede their rows (both versions counted until pruned, as pg_textsearch does)
        changed = [Chunk(chunk_id=d.chunk_id + "x", document_id=d.document_id, position=d.position,
                         content=d.content + " latch latch") for d in docs[:10]]
        _ingest(db, "acme", changed)
        assert _drift(admin) == [] and _unbounded(admin) == []
        with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
            assert t.delete_document(docs[20].document_id) == 2
            t.prune_documents("default", keep=[d.document_id for d in docs[30:]])
        assert _drift(admin) == [] and _unbounded(admin) == []
        # an upsert of an existing chunk id with new text moves the statistics (the UPDATE trigger), and a lexeme it
        # keeps counts its new term count in the bound though its df stays
        for text in ("zyqux gasket", "zyqux zyqux zyqux zyqux gasket"):
            _ingest(db, "acme", [Chunk(chunk_id="a78", document_id=docs[78].document_id, position=docs[78].position,
                                       content=text)])
        assert admin.execute("SELECT d.df, d.max_tf FROM hybrid.bm25_term_stats d JOIN hybrid.tenant t "
                             "USING (tenant_key) WHERE t.tenant_id = 'acme' AND d.lexeme = 'zyqux'").fetchone() == (1, 4)
        _ingest(db, "acme", [Chunk(chunk_id="a79", document_id=docs[79].document_id, position=docs[79].position,
                                   content="gear gear gear motor")])
        assert _drift(admin) == [] and _unbounded(admin) == []
        with HybridClient(db.dsn()) as c:
            c.drop_tenant("globex")
        assert admin.execute("SELECT count(*) FROM hybrid.bm25_term_stats s WHERE NOT EXISTS "
                             "(SELECT 1 FROM hybrid.tenant t WHERE t.tenant_key = s.tenant_key)").fetchone() == (0,)
        assert admin.execute("SELECT count(*) FROM hybrid.bm25_tenant_stats").fetchone()[0] == \
            admin.execute("SELECT count(*) FROM hybrid.tenant").fetchone()[0]


def test_a_write_that_bypasses_the_triggers_is_found_and_recounted(db: Db) -> None:
    _ingest(db, "acme", _corpus("a", 40, seed=5))
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        key = admin.execute("SELECT tenant_key FROM hybrid.tenant WHERE tenant_id = 'acme'").fetchone()[0]
        admin.execute(f"DELETE FROM hybrid.chunk_p{key} WHERE chunk_id IN ('a1', 'a2')")  # names the partition
        drift = _drift(admin, "acme")
        assert ("acme", "(documents)", 40, 38) in drift and len(drift) > 2
        assert admin.execute("SELECT tenant, n_docs FROM hybrid.rebuild_bm25_stats('acme')").fetchall() == [("acme", 38)]
        assert _drift(admin) == [] and _unbounded(admin) == []
        assert admin.execute(  # a recount tightens the bounds to the rows'
            "SELECT count(*) FROM hybrid._bm25_counted(%s) c JOIN hybrid.bm25_term_stats d ON d.tenant_key = %s "
            "AND d.lexeme = c.lexeme WHERE (d.max_tf, d.min_dl_tf) IS DISTINCT FROM (c.max_tf, c.min_dl_tf)",
            (key, key)).fetchone() == (0,)


def test_two_writers_of_one_tenant_at_once_leave_exact_statistics(db: Db) -> None:
    errors: list[BaseException] = []

    def load(prefix: str, seed: int) -> None:
        try:
            for batch in range(4):
                _ingest(db, "acme", _corpus(f"{prefix}{batch}-", 50, seed=seed + batch))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=load, args=(p, s)) for p, s in (("x", 10), ("y", 20))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        assert _drift(admin) == []
        assert admin.execute("SELECT s.n_docs FROM hybrid.bm25_tenant_stats s JOIN hybrid.tenant t USING (tenant_key) "
                             "WHERE t.tenant_id = 'acme'").fetchone() == (400,)


@pytest.mark.parametrize("tenant, other", [("acme", "globex"), ("globex", "acme")])
def test_a_tenants_sql_bm25_scores_do_not_move_when_another_tenant_adds_documents(db: Db, tenant: str,
                                                                                  other: str) -> None:
    _ingest(db, tenant, _corpus("t", 60, seed=6))
    before = _sql_scores(db, tenant, "pump pressure valve")
    assert len(before) > 10
    _ingest(db, other, [Chunk(chunk_id=f"o{i}", document_id=f"o{i}", content="pump pump valve") for i in range(300)])
    assert _sql_scores(db, tenant, "pump pressure valve") == before


def test_the_lengths_and_the_quantization_are_pg_textsearchs(db: Db) -> None:
    _ingest(db, "acme", _corpus("a", 120, seed=7))
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        # the cheap length the scorer reads equals the definition, on every row
        assert admin.execute(
            "SELECT count(*) FROM hybrid.chunk c WHERE hybrid._tsv_length(c.tsv) <> hybrid._matched_tsv_length("
            "c.tsv, hybrid._lexeme_tsquery(tsvector_to_array(c.tsv)))").fetchone() == (0,)
        # Lucene's SmallFloat floor buckets (pg_textsearch src/segment/fieldnorm.h)
        lens = [0, 1, 39, 40, 41, 45, 55, 56, 100, 300, 5000, 65560, 2013265944, 2147483647]
        got = [admin.execute("SELECT hybrid._bm25_fieldnorm(%s)", (n,)).fetchone()[0] for n in lens]
        assert got == [0, 1, 39, 40, 40, 44, 54, 56, 96, 280, 4632, 65560, 2013265944, 2013265944]
        # a lexeme with a quote or a backslash stands as written
        assert admin.execute("SELECT hybrid._lexeme_tsquery(ARRAY['o''brien', 'a\\b', 'x y'])::text").fetchone() == \
            ("'o''brien' | 'a\\\\b' | 'x y'",)


def test_explain_names_the_scorer_and_why(db: Db) -> None:
    _ingest(db, "acme", _corpus("a", 30, seed=8))
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
        t.conn.execute("SET hybrid.bm25_scorer = sql")
        plan = t.explain_retrieve(query_text="pump pressure")
    lexical = next(b for b in plan["branches"] if b["branch"] == "lexical")
    assert lexical["plan"] == ("BM25 by the SQL scorer over the GIN index (the tenant's statistics; "
                               "SET hybrid.bm25_scorer = sql)")
    assert lexical["rows"] > 0


def test_the_branches_statements_are_never_jit_compiled(db: Db) -> None:
    # A server built with LLVM compiles a statement planned above jit_above_cost (100,000 by default; jit is on by
    # default), on every call: the SQL scorer's last statement passed it at a 500,000-chunk tenant, a large
    # tenant's exact dense scan too. The setting of a function holds for all it calls (the scorers, ts_rank)
    with psycopg.connect(db.dsn()) as admin:
        for fn in ("hybrid._lexical_hits", "hybrid.search_dense", "hybrid.search_sparse"):
            config = admin.execute("SELECT proconfig FROM pg_proc WHERE oid = %s::regproc", (fn,)).fetchone()[0]
            assert "jit=off" in config, (fn, config)
        # and the caller's own jit setting is what it was after a call
        admin.execute("SET jit = on")
        admin.execute("SELECT count(*) FROM hybrid.search_lexical('pump')")
        assert admin.execute("SELECT current_setting('jit')").fetchone()[0] == "on"


@pytest.mark.parametrize("role", ["pyh_acme", "pyh_app"])
def test_no_tenant_role_reads_or_writes_the_statistics(db: Db, role: str) -> None:
    _ingest(db, "acme", _corpus("a", 10, seed=9))
    with psycopg.connect(db.dsn(role), autocommit=True) as c:
        for sql in ("SELECT * FROM hybrid.bm25_term_stats", "SELECT * FROM hybrid.bm25_tenant_stats",
                    "UPDATE hybrid.bm25_tenant_stats SET n_docs = 1",
                    "SELECT * FROM hybrid.bm25_stats_drift()", "SELECT * FROM hybrid.rebuild_bm25_stats()",
                    "SELECT * FROM hybrid._bm25_sql_hits(1, 'acme', '{}', true, 'pump', 10, NULL, NULL, NULL)",
                    "SELECT hybrid._bm25_stats_add('{1}', '{pump}', '{100}')",
                    "SELECT * FROM hybrid._bm25_sql_scored(1, 'acme', '{}', true, NULL, NULL, 'pump', '{pump}', '{1}', "
                    "'{1}', 1, 'pump', 10)"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(sql)
    # nor the planner's statistics of their columns (the lexemes every tenant holds most)
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        admin.execute("ANALYZE hybrid.bm25_term_stats, hybrid.bm25_tenant_stats")
        assert admin.execute("SELECT count(*) FROM pg_stats WHERE tablename LIKE 'bm25%'").fetchone()[0] > 0
    with psycopg.connect(db.dsn(role), autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM pg_stats WHERE tablename LIKE 'bm25%'").fetchone() == (0,)


# --- the lexical audit: pg_textsearch's answers against the exact scorer (hybrid.audit_bm25) --------------------

def _audit(admin: psycopg.Connection[Any], **kw: Any) -> list[dict[str, Any]]:
    args = ", ".join(f"{k} => %({k})s" for k in kw)
    with admin.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute(f"SELECT * FROM hybrid.audit_bm25({args})", kw).fetchall()


def _engine_bm25(db: Db, tenant: str, query: str, k: int) -> list[tuple[str, float]]:
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant(tenant) as t:
        return [(r["chunk_id"], float(r["value"])) for r in t.conn.execute(
            "SELECT chunk_id, value FROM hybrid.search_lexical(%s, %s)", (query, k)).fetchall()]


def _agree(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
    """The same rows with the same scores to 1e-5 relative, in the same order but for ties."""
    return len(a) == len(b) and dict(a).keys() == dict(b).keys() and all(
        abs(x - dict(b)[cid]) <= 1e-5 * abs(x) for cid, x in a)


@pytest.mark.usefixtures("require_bm25")
def test_the_audit_finds_statistics_pg_textsearch_kept_after_deletes_and_the_engine_answers_exactly(db: Db) -> None:
    docs = _corpus("a", 200, seed=11)
    _ingest(db, "acme", docs)
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        assert [(r["audited"], r["mismatches"], r["action"]) for r in _audit(admin, tenant_id="acme")] == [(20, 0, "none")]
        # pg_textsearch 1.0 never takes a deleted row out of its statistics (N stays 200): its scores drift
        with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
            for d in sorted({d.document_id for d in docs})[:60]:
                t.delete_document(d)
        found = _audit(admin, tenant_id="acme", heal=False)
        assert found[0]["mismatches"] > 0 and found[0]["action"] == "none", found
        # meanwhile the engine answers from the SQL scorer, and explain says why
        assert _engine_bm25(db, "acme", "pump pressure", 100) == _sql_scores(db, "acme", "pump pressure", 100)
        with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
            plan = t.explain_retrieve(query_text="pump pressure")
        assert "disagreed with the exact scores at its last audit" in next(
            b["plan"] for b in plan["branches"] if b["branch"] == "lexical")
        with psycopg.connect(db.dsn()) as c:
            assert {f.subject: f.problem for f in check(c)}["BM25 audit"] is True
        # healed: rebuilt, audited again, answered through the index once more
        healed = _audit(admin, tenant_id="acme")
        assert (healed[0]["mismatches"], healed[0]["action"]) == (0, "rebuilt"), healed
        with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
            t.conn.execute("SELECT * FROM hybrid.search_lexical('pump', 5)")
            assert t.conn.execute("SELECT current_setting('hybrid.bm25_scores')").fetchone()["current_setting"] in (
                "index scan", "re-scored")


@pytest.mark.usefixtures("require_bm25")
def test_two_writers_then_k_1000_the_engine_answers_as_the_exact_scorer(db: Db) -> None:
    errors: list[BaseException] = []

    def load(prefix: str, seed: int) -> None:
        try:
            for batch in range(6):
                _ingest(db, "acme", _corpus(f"{prefix}{batch}-", 100, seed=seed + batch))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=load, args=(p, s)) for p, s in (("x", 30), ("y", 40))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM hybrid.chunk").fetchone() == (1200,)
        verdict = _audit(admin, tenant_id="acme", k=1000)
        assert verdict[0]["mismatches"] == 0, verdict  # healed where it was not
    for q in ("pump pressure valve", "rotor", "seal gasket bearing shaft"):
        assert _agree(_engine_bm25(db, "acme", q, 1000), _sql_scores(db, "acme", q, 1000)), q


@pytest.mark.usefixtures("require_bm25")
def test_a_chunk_near_the_tsvector_limit_is_scored_alike_by_both(db: Db) -> None:
    # 60,000 distinct words (about 650 kB of lexemes and positions): under PostgreSQL's 1 MB tsvector limit
    big = " ".join(f"w{i}x" for i in range(60000)) + " pump pump valve"
    _ingest(db, "acme", [Chunk(chunk_id="big", document_id="big", content=big), *_corpus("a", 30, seed=12)])
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        assert _drift(admin) == []
        assert _audit(admin, tenant_id="acme")[0]["mismatches"] == 0
    sql = _sql_scores(db, "acme", "pump valve w59999x")
    assert "big" in dict(sql) and _agree(_engine_bm25(db, "acme", "pump valve w59999x", 1000), sql)


def test_the_audit_names_a_bad_argument(db: Db) -> None:
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        for kw, msg in (({"queries": 0}, "queries"), ({"k": 1001}, "k"), ({"heal": None}, "heal"),
                        ({"tenant_id": "nope"}, "tenant_id 'nope' does not exist")):
            with pytest.raises(psycopg.errors.InvalidParameterValue, match=msg):
                _audit(admin, **kw)


@pytest.mark.parametrize("fn", ["bm25_stats_drift", "rebuild_bm25_stats", "audit_bm25", "refresh_audit_samples"])
def test_a_maintenance_function_names_a_tenant_that_does_not_exist(db: Db, fn: str) -> None:
    # drift and rebuild answered no rows for a mistyped tenant, as for an exact or a recounted one
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="tenant_id 'acmee' does not exist"):
            admin.execute(f"SELECT * FROM hybrid.{fn}('acmee')")
        admin.execute(f"SELECT * FROM hybrid.{fn}()")  # every tenant
        assert {r[0] for r in admin.execute(f"SELECT * FROM hybrid.{fn}('globex')")} <= {"globex"}


@pytest.mark.parametrize(("fn", "args"), [
    ("hybrid.rebuild_bm25_stats", "text"), ("hybrid.bm25_stats_drift", "text"),  # no check before: a count under RLS
    ("hybrid.audit_bm25", "text, integer, integer, boolean"), ("hybrid.refresh_audit_samples", "text"),
    ("hybrid.tenants", "text, integer"), ("hybrid.drop_tenant", "text")])
def test_an_admin_function_owned_by_a_role_under_rls_says_how_to_fix_it(db: Db, fn: str, args: str) -> None:
    # installed by a role that is no superuser and does not bypass RLS (a managed server), such a function would see
    # only some rows: rebuild_bm25_stats would have recounted the statistics of rows it could not see
    role = f"pyh_plain_owner_{fn.split('.')[1]}"
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        me = admin.execute("SELECT current_user").fetchone()[0]
        admin.execute(f"CREATE ROLE {role} NOLOGIN IN ROLE hybrid_user, hybrid_definer")
        try:  # the owner of the schema's functions, as an install by that role makes it
            for f in (f"{fn}({args})", "hybrid._check_bypasses_rls(regprocedure)",
                      "hybrid._tenants_chosen(regprocedure, text)"):
                admin.execute(f"ALTER FUNCTION {f} OWNER TO {role}")
            with pytest.raises(psycopg.errors.InsufficientPrivilege,
                               match=f"{fn} must be owned by a superuser or a BYPASSRLS role, not {role}") as info:
                admin.execute(f"SELECT * FROM {fn}('acme')")
            hint = f"ALTER FUNCTION {fn}({args.replace(', ', ',')}) OWNER TO a role that bypasses RLS."
            assert info.value.diag.message_hint == hint
        finally:
            admin.execute(f"REASSIGN OWNED BY {role} TO {me}")
            admin.execute(f"DROP ROLE {role}")


@pytest.mark.usefixtures("require_bm25")
def test_the_engine_takes_the_index_unless_told_a_size_for_the_sql_scorer(db: Db) -> None:
    _ingest(db, "acme", _corpus("a", 30, seed=12))
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
        def scorer(setup: str) -> str:
            t.conn.execute(setup)
            t.conn.execute("SELECT * FROM hybrid.search_lexical('pump pressure', 10)").fetchall()
            return str(t.conn.execute("SELECT current_setting('hybrid.bm25_scores') AS s").fetchone()["s"])
        # by default the index at every size (measured the faster: docs/searching.md#bm25-on-any-postgresql)
        assert scorer("SELECT 1") in ("index scan", "re-scored")
        assert scorer("SET hybrid.bm25_sql_max_chunks = 30") == \
            "SQL scorer: the tenant holds 30 chunks, at most hybrid.bm25_sql_max_chunks (30)"
        plan = t.explain_retrieve(query_text="pump pressure")
        assert "the tenant holds 30 chunks" in next(b["plan"] for b in plan["branches"] if b["branch"] == "lexical")
        assert scorer("SET hybrid.bm25_sql_max_chunks = 29") in ("index scan", "re-scored")
        assert scorer("SET hybrid.bm25_sql_max_chunks = ''") in ("index scan", "re-scored")
        assert scorer("SET hybrid.bm25_scorer = index") in ("index scan", "re-scored")
        assert scorer("SET hybrid.bm25_scorer = sql") == "SQL scorer: SET hybrid.bm25_scorer = sql"
    for setup, name in (("SET hybrid.bm25_scorer = fast", "hybrid.bm25_scorer"),
                        ("SET hybrid.bm25_sql_max_chunks = '2k'", "hybrid.bm25_sql_max_chunks")):
        with psycopg.connect(db.dsn("pyh_acme"), autocommit=True) as conn:
            conn.execute(setup)
            with pytest.raises(psycopg.errors.InvalidParameterValue, match=name):
                conn.execute("SELECT * FROM hybrid.search_lexical('pump', 10)")


def test_pruning_scores_only_what_can_reach_the_kth_score_and_loses_nothing(db: Db) -> None:
    _ingest(db, "acme", _corpus("a", 400, seed=13))
    long_query = " ".join(WORDS)  # 40 terms: past the bound's budget of branches
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        # the lexemes a chunk must hold to score theta: ub 3, 2, 1 and theta 4 need a, and b or c
        must = admin.execute("SELECT (hybrid._bm25_must_match(ARRAY['a','b','c'], ARRAY[3,2,1]::float8[], "
                             "ARRAY[6,3,1]::float8[], 4)).must::tsquery = $$'a' & ('b' | 'c')$$::tsquery").fetchone()
        assert must == (True,)
        assert admin.execute("SELECT (hybrid._bm25_must_match(ARRAY['a','b','c'], ARRAY[3,2,1]::float8[], "
                             "ARRAY[6,3,1]::float8[], 4, 1, 0)).must").fetchone() == ("'a'",)  # budget spent
    for q in QUERIES + [long_query]:
        full = _sql_scores(db, "acme", q, 1000)  # at most 1,000 chunks hold a term: all scored, nothing pruned
        for k in (1, 3, 10, 30):
            assert _sql_scores(db, "acme", q, k) == full[:k], (q, k)


def test_each_workaround_for_pg_textsearch_1_0_0_is_skipped_by_the_release_that_fixed_it(db: Db) -> None:
    # shared/DESIGN.md: 1.3.0 keeps the memtable on disk (no restart loss, standbys current), 1.3.1 fixed the scan's
    # duplicate and partial scores; the engine reads these gates before each workaround (the heal, the standby's
    # SQL scorer, the re-score and the serial builds)
    with psycopg.connect(db.dsn()) as c:
        fixed = {(bug, v): c.execute("SELECT hybrid._bm25_fixed(%s, %s::integer[])", (bug, list(v))).fetchone()[0]
                 for bug in ("restart", "standby", "rescan", "nosuch")
                 for v in ((1, 0, 0), (1, 2, 0), (1, 3, 0), (1, 3, 1), (2, 0))}
        loaded = c.execute("SELECT hybrid._bm25_version()").fetchone()[0]
        here = {bug: c.execute("SELECT hybrid._bm25_fixed(%s)", (bug,)).fetchone()[0] for bug in ("restart", "rescan")}
    assert [v for (bug, v), f in fixed.items() if bug == "restart" and f] == [(1, 3, 0), (1, 3, 1), (2, 0)]
    assert [v for (bug, v), f in fixed.items() if bug == "standby" and f] == [(1, 3, 0), (1, 3, 1), (2, 0)]
    assert [v for (bug, v), f in fixed.items() if bug == "rescan" and f] == [(1, 3, 1), (2, 0)]
    assert not any(f for (bug, _), f in fixed.items() if bug == "nosuch")
    if loaded == [1, 0, 0]:  # the embedded server's: every workaround runs
        assert here == {"restart": False, "rescan": False}
