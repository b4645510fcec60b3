"""Pooled tenants (issue 51): a small tenant's chunks live in hybrid.chunk_pool, shared with other small tenants, and
every branch answers for it as for a tenant with a partition of its own; nothing a pool neighbour writes moves its
scores; a tenant moves between the pool and a partition of its own online, losing and duplicating no write; admin
commands work at thousands of tenants."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from pyhybrid import Chunk, HybridClient, InvalidParameterError
from pyhybrid.types import sparse_text
from pyhybrid.maintenance import place_tenants
from tests.conftest import Db
from tests.helpers import unit

TEXTS = ["The infusion pump raises an occlusion alarm when the line is blocked.",
         "Battery low warning: replace the battery within two hours.",
         "Clean the filter weekly; a blocked filter raises the pressure alarm.",
         "Occlusion downstream of the pump stops the infusion.",
         "The pressure sensor reads the line pressure every second.",
         "Alarm volume can be set from the settings menu."]


def _chunks(prefix: str) -> list[Chunk]:
    out = []
    for i, text in enumerate(TEXTS * 3):
        out.append(Chunk(chunk_id=f"{prefix}{i}", document_id=f"doc{i % 6}", content=f"{text} ({i})",
                         embedding=unit(i), sparse_embedding={i % 5: 1.0, 7: 0.5},
                         acl_labels=["quality"] if i % 4 == 0 else [], metadata={"part": i % 3}))
    return out


def _fill(db: Db, tenant: str, placement: str) -> None:
    with HybridClient(db.dsn()) as admin:
        admin.create_tenant(tenant, placement=placement)
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant(tenant) as t:
        t.ingest(_chunks(tenant + ":"))
        t.add_edges([{"src": f"{tenant}:{i}", "dst": f"{tenant}:{i + 1}", "rel": "NEXT"} for i in range(0, 12, 2)])


def _placement(db: Db, tenant: str) -> str:
    with HybridClient(db.dsn()) as admin:
        return next(t["placement"] for t in admin.tenants() if t["tenant_id"] == tenant)


QUERIES: list[dict[str, Any]] = [
    {"query_text": "occlusion alarm", "query_embedding": unit(3)},
    {"query_text": "occlusion alarm", "vector_weight": 0, "graph_weight": 0},
    {"query_text": "blocked filter pressure", "lexical": "ts_rank", "vector_weight": 0, "graph_weight": 0},
    {"query_embedding": unit(5), "query_text": "", "graph_weight": 0},
    {"query_sparse": {1: 1.0, 7: 1.0}, "query_text": "", "graph_weight": 0},
    {"query_text": "battery", "query_embedding": unit(1), "graph_weight": 1.0, "graph_hops": 2},
    {"query_text": "alarm", "query_embedding": unit(2), "filter": {"part": 1}},
    {"query_text": "alarm pump", "query_embedding": unit(2), "acl_labels": ["quality"]},
]


def _answers(db: Db, tenant: str, query: dict[str, Any]) -> list[tuple[str, float]]:
    q = dict(query)
    labels = q.pop("acl_labels", [])
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant(tenant, labels) as t:
        refs = t.retrieve(top_k=8, **q)
    return [(r.chunk_id.split(":", 1)[1], round(r.score, 4)) for r in refs]


@pytest.mark.usefixtures("require_age")
def test_a_pooled_tenant_answers_every_branch_as_a_dedicated_one(db: Db) -> None:
    _fill(db, "pooled", "pool")
    _fill(db, "own", "dedicated")
    assert (_placement(db, "pooled"), _placement(db, "own")) == ("pool", "dedicated")
    for query in QUERIES:
        got = _answers(db, "pooled", query)
        assert got, query
        assert got == _answers(db, "own", query), query
    # and its lexical branch says why it scored by SQL
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("pooled") as t:
        plan = t.conn.execute("SELECT hybrid.explain_retrieve(query_text => 'occlusion alarm') AS e").fetchone()["e"]
    assert "pooled" in str(plan)


def _leaf(conn: psycopg.Connection[Any], key: int) -> int:
    return next(i for i in range(8) if conn.execute(
        "SELECT satisfies_hash_partition('hybrid.chunk_pool'::regclass, 8, %s, %s)", (i, key)).fetchone()[0])


def _top(db: Db, tenant: str, **kw: Any) -> tuple[str, float]:
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant(tenant) as t:
        r = t.retrieve(top_k=1, graph_weight=0, **kw)[0]
    return r.chunk_id, r.scores.get("keyword") or r.scores.get("dense") or r.score


def test_nothing_a_pool_neighbour_writes_moves_a_pooled_tenants_scores(db: Db) -> None:
    _fill(db, "quiet", "pool")
    with HybridClient(db.dsn()) as admin, psycopg.connect(db.dsn()) as conn:
        key = conn.execute("SELECT tenant_key FROM hybrid.tenant WHERE tenant_id = 'quiet'").fetchone()[0]
        neighbour = None
        for n in range(64):  # a tenant hashed into the same leaf of the pool
            admin.create_tenant(f"n{n}", placement="pool")
            k = conn.execute("SELECT tenant_key FROM hybrid.tenant WHERE tenant_id = %s", (f"n{n}",)).fetchone()[0]
            if _leaf(conn, k) == _leaf(conn, key):
                neighbour = f"n{n}"
                break
    assert neighbour is not None
    before = (_top(db, "quiet", query_text="occlusion alarm", vector_weight=0),
              _top(db, "quiet", query_text="", query_embedding=unit(4)))
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant(neighbour) as t:
        t.ingest([Chunk(chunk_id=f"x{i}", document_id=f"x{i}", content="occlusion alarm occlusion " * (1 + i % 5),
                        embedding=unit(4)) for i in range(300)])
    after = (_top(db, "quiet", query_text="occlusion alarm", vector_weight=0),
             _top(db, "quiet", query_text="", query_embedding=unit(4)))
    assert after == before
    with psycopg.connect(db.dsn()) as conn:  # the two really share a leaf
        rows = conn.execute("SELECT count(DISTINCT tableoid) FROM hybrid.chunk WHERE tenant_id IN ('quiet', %s)",
                            (neighbour,)).fetchone()[0]
    assert rows == 1


POOL_GRAPHS = ("SELECT DISTINCT c.reloptions, x.indisvalid, pg_get_indexdef(x.indexrelid) ~ 'sparse' FROM pg_inherits h "
               "JOIN pg_index x ON x.indrelid = h.inhrelid JOIN pg_class c ON c.oid = x.indexrelid "
               "JOIN pg_am a ON a.oid = c.relam WHERE h.inhparent = 'hybrid.chunk_pool'::regclass AND a.amname = 'hnsw'")


def test_the_pools_graphs_are_the_lightest_before_and_after_a_dense_kind_change(db: Db) -> None:
    # no pooled tenant is searched through them; at hybrid.chunk's density each pooled insert paid for a graph search
    light = ["m=2", "ef_construction=4"]
    _fill(db, "small", "pool")
    with psycopg.connect(db.dsn(), autocommit=True) as conn:
        assert sorted(conn.execute(POOL_GRAPHS).fetchall()) == [(light, True, False), (light, True, True)]
        assert conn.execute("SELECT hybrid.set_dense_index_kind('halfvec')").fetchone()[0].endswith(
            "the pool's built here)")
        assert sorted(conn.execute(POOL_GRAPHS).fetchall()) == [(light, True, False), (light, True, True)]
        parent = conn.execute("SELECT reloptions FROM pg_class WHERE oid = 'hybrid.chunk_embedding_hnsw'::regclass")
        assert parent.fetchone()[0] is None  # a new partition still gets the parent's (the default) density
    assert _answers(db, "small", QUERIES[3])[0][0] == "5"  # exact: its own vector first


def test_a_tenant_role_reaches_nothing_of_the_pool_but_its_own(db: Db) -> None:
    with HybridClient(db.dsn()) as admin:  # acme and globex have partitions of their own: into the pool
        admin.move_tenant("acme", "pool"), admin.move_tenant("globex", "pool")
    _fill(db, "acme", "pool")  # pyh_acme is bound to acme
    _fill(db, "globex", "pool")
    with psycopg.connect(db.dsn("pyh_acme")) as conn:
        for sql in ("SELECT count(*) FROM hybrid.chunk_pool", "SELECT count(*) FROM hybrid.chunk_pool_0",
                    "EXPLAIN SELECT * FROM hybrid.chunk_pool", "CALL hybrid.move_tenant('globex', 'dedicated')",
                    "SELECT * FROM hybrid.pool_due()", "SELECT hybrid._writer_key('globex')",
                    "SELECT hybrid._move_rows('globex', 'dedicated')", "LOCK TABLE hybrid.chunk_pool_3"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                with conn.transaction():
                    conn.execute(sql)
        sql = "SELECT chunk_id FROM hybrid_retrieve(query_text => 'alarm', top_k => 50)"
        ids = [r[0] for r in conn.execute(sql)]
        conn.execute("SET hybrid.tenant_id = 'globex'")  # not a credential: nothing at all
        assert conn.execute(sql).fetchall() == []
    assert ids and all(i.startswith("acme:") for i in ids)


@pytest.mark.usefixtures("require_bm25")
def test_a_pooled_tenants_own_login_role_does_not_write_where_it_would_hold_its_leaf(db: Db) -> None:
    # pg_textsearch 1.0.0 keeps a written BM25 index locked to the end of the writing transaction, beyond every
    # timeout and pg_terminate_backend; the pool's leaves share theirs: a tenant role that wrote and held its
    # transaction open would stop its neighbours' writes (measured: a neighbour's insert waited out its
    # statement_timeout). So a pooled tenant is written by app roles only, there
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        assert admin.execute("SELECT hybrid._bm25_fixed('write_lock')").fetchone() == (False,)  # 1.0.0 here
        admin.execute("SELECT hybrid.create_tenant('solo', NULL, 'pool')")
        admin.execute("DO $$ BEGIN CREATE ROLE pyh_solo LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not write tenant 'solo' while it is pooled"):
            admin.execute("SELECT hybrid.grant_tenant('pyh_solo', 'solo', ARRAY['*'])")
        admin.execute("SELECT hybrid.grant_tenant('pyh_solo', 'solo')")  # a reader: as any tenant
        # a grant of every label from before (or kept through a move into the pool): its writes are refused
        admin.execute("UPDATE hybrid.tenant_grant SET acl_labels = '{*}' WHERE role_name = 'pyh_solo'")
    with psycopg.connect(db.dsn("pyh_solo")) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="while it is pooled"):
            conn.execute("SELECT hybrid.begin_ingest()")
            conn.execute("SELECT * FROM hybrid.finish_ingest('notes')")
    with psycopg.connect(db.dsn("pyh_acme")) as conn:  # another tenant's role cannot probe who is pooled
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            conn.execute("SELECT hybrid._pool_write_check('solo', 'pyh_acme')")
    _fill(db, "solo", "pool")  # the app role writes it as it is
    with HybridClient(db.dsn()) as admin:
        admin.move_tenant("solo", "dedicated")
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        admin.execute("SELECT hybrid.grant_tenant('pyh_solo', 'solo', ARRAY['*'])")  # its own partition: writable
    with HybridClient(db.dsn("pyh_solo")) as c, c.tenant("solo") as t:
        assert t.delete_document("doc1") > 0


def test_a_move_changes_no_answer_and_keeps_the_statistics_exact(db: Db) -> None:
    _fill(db, "mover", "pool")
    before = [_answers(db, "mover", q) for q in QUERIES]
    with HybridClient(db.dsn()) as admin:
        for placement in ("dedicated", "pool", "dedicated"):
            admin.move_tenant("mover", placement)
            assert _placement(db, "mover") == placement
            assert [_answers(db, "mover", q) for q in QUERIES] == before, placement
            admin.move_tenant("mover", placement)  # already there: nothing to do
    with psycopg.connect(db.dsn()) as conn:
        assert conn.execute("SELECT * FROM hybrid.bm25_stats_drift('mover')").fetchall() == []
        parts = conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'hybrid.chunk'::regclass").fetchone()[0]
        key = conn.execute("SELECT tenant_key FROM hybrid.tenant WHERE tenant_id = 'mover'").fetchone()[0]
        assert conn.execute("SELECT to_regclass(%s)", (f"hybrid.chunk_p{key}",)).fetchone()[0] is not None
    assert parts == 4  # acme's, globex's, the pool and the mover's: the one it left was dropped


@pytest.mark.slow
def test_a_move_under_concurrent_writes_and_searches_loses_and_duplicates_nothing(db: Db) -> None:
    _fill(db, "busy", "pool")
    errors: list[BaseException] = []
    written: list[str] = []
    done = threading.Event()

    def write() -> None:
        try:
            with HybridClient(db.dsn("pyh_app")) as c:
                for b in range(60):
                    with c.tenant("busy") as t:
                        batch = [Chunk(chunk_id=f"w{b}-{i}", document_id=f"w{b}", content=f"note {b} on the pump {i}",
                                       embedding=unit(1000 + b * 10 + i)) for i in range(5)]
                        t.ingest(batch)
                        if b % 7 == 3:
                            t.delete_document(f"w{b - 1}")
                    written.extend(ch.chunk_id for ch in batch)
                    if b % 7 == 3:
                        written[:] = [w for w in written if not w.startswith(f"w{b - 1}-")]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def search() -> None:
        try:
            with HybridClient(db.dsn("pyh_app")) as c:
                while not done.is_set():
                    with c.tenant("busy") as t:
                        assert t.retrieve(query_text="occlusion alarm pump", query_embedding=unit(3), top_k=5)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def branches() -> None:  # each branch called alone, as a SQL client may
        vec = "[" + ",".join(str(float(x)) for x in unit(3)) + "]"
        try:
            with psycopg.connect(db.dsn("pyh_app")) as conn:
                while not done.is_set():
                    with conn.transaction():
                        conn.execute("SELECT set_config('hybrid.tenant_id', 'busy', true)")
                        for sql in ("SELECT * FROM hybrid.search_lexical('occlusion alarm pump', 5)",
                                    f"SELECT * FROM hybrid.search_dense('{vec}'::vector, 5)",
                                    f"SELECT * FROM hybrid.search_sparse('{sparse_text('q', {1: 1.0, 7: 0.5})}'::sparsevec, 5)"):
                            assert conn.execute(sql).fetchall(), sql
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=write), threading.Thread(target=search), threading.Thread(target=branches)]
    for th in threads:
        th.start()
    with HybridClient(db.dsn()) as admin:
        for placement in ("dedicated", "pool", "dedicated", "pool"):
            time.sleep(0.3)
            admin.move_tenant("busy", placement)
    threads[0].join()
    done.set()
    for th in threads[1:]:
        th.join()
    assert errors == []
    with psycopg.connect(db.dsn()) as conn:
        ids = [r[0] for r in conn.execute(
            "SELECT chunk_id FROM hybrid.chunk WHERE tenant_id = 'busy' AND chunk_id LIKE 'w%' AND NOT superseded")]
        assert sorted(ids) == sorted(written)  # each write once, none lost
        assert conn.execute("SELECT * FROM hybrid.bm25_stats_drift('busy')").fetchall() == []


def test_a_tenant_past_the_pools_size_is_due_and_placed(db: Db) -> None:
    with psycopg.connect(db.dsn(), autocommit=True) as conn:
        conn.execute("INSERT INTO hybrid.setting (key, value) VALUES ('pool_max_chunks', '10')")
    _fill(db, "grown", "pool")
    _fill(db, "small", "pool")
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("small") as t:
        t.delete_document("doc0"), t.delete_document("doc1"), t.delete_document("doc2")
    with HybridClient(db.dsn()) as admin:
        due = admin.pool_due()
        assert [d[0] for d in due] == ["grown"] and due[0][1] == 18
    assert place_tenants(db.dsn()) == ["grown"]
    assert (_placement(db, "grown"), _placement(db, "small")) == ("dedicated", "pool")
    assert place_tenants(db.dsn()) == []


def test_a_placement_is_pool_or_dedicated(db: Db) -> None:
    with HybridClient(db.dsn()) as admin:
        with pytest.raises(InvalidParameterError, match="placement"):
            admin.create_tenant("t1", placement="cloud")
        with pytest.raises(InvalidParameterError, match="placement"):
            admin.move_tenant("acme", "elsewhere")
        with pytest.raises(InvalidParameterError, match="tenant_id 'nobody' does not exist"):
            admin.move_tenant("nobody", "dedicated")
    with psycopg.connect(db.dsn()) as conn:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="placement must be pool or dedicated"):
            conn.execute("SELECT hybrid.create_tenant('t2', NULL, 'cloud')")
        conn.rollback()
        conn.execute("INSERT INTO hybrid.setting (key, value) VALUES ('tenant_placement', 'moon')")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="setting tenant_placement must be"):
            conn.execute("SELECT hybrid.create_tenant('t3')")
        conn.rollback()
        # inside a transaction block the move cannot commit between its steps: refused, nothing moved
        with pytest.raises(psycopg.errors.InvalidTransactionTermination):
            conn.execute("CALL hybrid.move_tenant('acme', 'pool')")
        conn.rollback()
    assert _placement(db, "acme") == "dedicated"
    assert [t for t in ("t1", "t2", "t3") if t in {x["tenant_id"] for x in HybridClient(db.dsn()).tenants()}] == []


def test_a_pooled_tenant_changes_language_in_the_pool(db: Db) -> None:
    with HybridClient(db.dsn()) as admin:
        admin.create_tenant("de", placement="pool")
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("de") as t:
        t.ingest([Chunk(chunk_id="h", document_id="h", content="Die Häuser am See sind alt.", embedding=unit(1)),
                  Chunk(chunk_id="z", document_id="z", content="Der Zug fährt nach Berlin.", embedding=unit(2))])
    with HybridClient(db.dsn()) as admin:
        admin.set_tenant_language("de", "german")
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("de") as t:
        refs = t.retrieve(query_text="Haus", vector_weight=0, graph_weight=0)
    assert [r.chunk_id for r in refs] == ["h"]
    with psycopg.connect(db.dsn()) as conn:
        assert conn.execute("SELECT * FROM hybrid.bm25_stats_drift('de')").fetchall() == []


@pytest.mark.slow
def test_admin_commands_work_at_three_thousand_tenants(db: Db, tmp_path: Any) -> None:
    from pyhybrid import doctor
    from pyhybrid.transfer import export_tenant, import_tenant

    with psycopg.connect(db.dsn(), autocommit=True) as conn:
        conn.execute("SELECT hybrid.create_tenant('p' || g) FROM generate_series(1, 3000) g")
        conn.execute("SELECT hybrid.create_tenant('d' || g, NULL, 'dedicated') FROM generate_series(1, 20) g")
    _fill(db, "p7", "pool")
    with HybridClient(db.dsn()) as admin:
        listed = admin.tenants()
        assert len(listed) == 3022 and {t["placement"] for t in listed} == {"pool", "dedicated"}
        assert next(t for t in listed if t["tenant_id"] == "p7")["chunks"] == 18
        # one transaction over every tenant: the pooled ones lock the pool's leaves, not a relation each
        with admin.connection() as conn, conn.transaction():
            assert len(conn.execute("SELECT * FROM hybrid.tenants()").fetchall()) == 3022
        assert export_tenant(admin, "p7", tmp_path / "p7.jsonl")["chunks"] == 18
        assert import_tenant(admin, tmp_path / "p7.jsonl", "p7copy")["chunks"] == 18
        assert {r: n for r, n in admin.drop_tenant("p7").items() if n}["chunks"] == 18
    with psycopg.connect(db.dsn()) as conn:
        findings = list(doctor.check(conn))
    assert not [f for f in findings if f.problem], findings


def test_the_cli_creates_lists_moves_and_places_tenants(db: Db, capsys: pytest.CaptureFixture[str]) -> None:
    from pyhybrid.cli import main

    assert main(["--dsn", db.dsn(), "tenant", "create", "cli1", "--placement", "dedicated"]) == 0
    assert main(["--dsn", db.dsn(), "tenant", "create", "cli2"]) == 0
    assert main(["--dsn", db.dsn(), "tenant", "move", "cli1", "--pool"]) == 0
    assert "tenant cli1: in the pool" in capsys.readouterr().out
    assert (_placement(db, "cli1"), _placement(db, "cli2")) == ("pool", "pool")
    assert main(["--dsn", db.dsn(), "tenant", "move", "cli2", "--dedicated"]) == 0
    assert main(["--dsn", db.dsn(), "tenant", "list"]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:] if line.strip()}
    assert lines["cli1"][6] == "pool" and lines["cli2"][6] == "dedicated" and lines["acme"][6] == "dedicated"
    assert main(["--dsn", db.dsn(), "tenant", "place"]) == 0
    assert "0 tenant(s) moved" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # --dedicated or --pool, one of them
        main(["--dsn", db.dsn(), "tenant", "move", "cli1"])
