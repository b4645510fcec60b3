"""A tenant's whole life: drop it (everything it holds, and only that), export it, import it elsewhere."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pyhybrid import AbstainedWarning, Chunk, HybridClient, InvalidParameterError, TenantError
from pyhybrid.transfer import export_tenant, import_tenant
from tests.conftest import Db
from tests.helpers import chunks, unit

COUNTS_SQL = """SELECT (SELECT count(*) FROM hybrid.chunk WHERE tenant_id = %(t)s),
       (SELECT count(*) FROM hybrid.corpus WHERE tenant_id = %(t)s),
       (SELECT count(*) FROM hybrid.tenant_grant WHERE tenant_id = %(t)s),
       (SELECT count(*) FROM hybrid.tenant WHERE tenant_id = %(t)s)"""
GRAPH_SQL = """SELECT (SELECT count(*) FROM hybrid.graph_node WHERE tenant_id = %(t)s),
       (SELECT count(*) FROM hybrid_graph._ag_label_vertex WHERE properties::text LIKE '%%"tenant_id": "' || %(t)s || '"%%'),
       (SELECT count(*) FROM hybrid_graph._ag_label_edge WHERE properties::text LIKE '%%"tenant_id": "' || %(t)s || '"%%')"""


def _fill(dsn: str, tenant: str, seed: int) -> None:
    """Chunks in two corpora (one ACL-restricted, one superseded), edges with properties."""
    with HybridClient(dsn) as c, c.tenant(tenant, ["*"]) as t:
        t.ingest(chunks(f"{tenant}-a", 12, doc_size=3, seed=seed), corpus_id="manuals")
        t.ingest(chunks(f"{tenant}-b", 5, seed=seed + 1), corpus_id="audits")
        t.ingest([Chunk(chunk_id=f"{tenant}-secret", document_id="S", content="quality audit finding valve",
                        embedding=unit(seed * 7 + 3), acl_labels=["quality"], metadata={"k": [1, 2]})],
                 corpus_id="audits")
        # a re-ingested document supersedes its old chunks: those stay out of exports
        t.ingest([Chunk(chunk_id=f"{tenant}-a-9-v2", document_id=f"{tenant}-a-doc-3", content="pumps revised",
                        embedding=unit(seed * 7 + 5))], corpus_id="manuals")
        t.add_edges([{"src": f"{tenant}-a-1", "dst": f"{tenant}-a-2", "rel": "CITES", "properties": {"strength": 0.5}},
                     {"src": f"{tenant}-a-2", "dst": f"{tenant}:entity:pump", "rel": "MENTIONS"},
                     {"src": f"{tenant}-secret", "dst": f"{tenant}:entity:pump", "rel": "MENTIONS"},
                     {"src": f"{tenant}-b-0", "dst": f"{tenant}-a-1", "rel": "CITES"}])


def _answers(dsn: str, tenant: str) -> list[list[tuple[str, int | None, int | None, int | None]]]:
    """What a set of retrievals returns: ids and per-branch ranks, with and without the ACL label.

    Fused by ranks (rrf): pg_textsearch 1.0's statistics count the source's superseded chunks, which an
    export leaves behind, so BM25 scores (not ranks) can differ after a move and a score-based fusion
    can order near-ties differently (README, Moving and removing a tenant)."""
    out = []
    with HybridClient(dsn) as c:
        for labels in ([], ["quality"]):
            with c.tenant(tenant, labels) as t:
                for q in range(4):
                    for kw in ({"query_embedding": unit(q * 11 + 1), "query_text": "pumps valves alarms item3"},
                               {"query_text": "quality audit valve", "lexical": "ts_rank"},
                               {"graph_seeds": [f"{tenant}-a-1", f"{tenant}:entity:pump"], "graph_hops": 2},
                               {"query_embedding": unit(q * 11 + 2), "corpus_ids": ["audits"]}):
                        out.append([(r.chunk_id, r.vector_rank, r.keyword_rank, r.graph_rank)
                                    for r in t.retrieve(**kw, top_k=8, fusion="rrf")])
    return out


@pytest.mark.usefixtures("require_age")
def test_drop_tenant_removes_everything_it_holds_and_nothing_else(db: Db) -> None:
    _fill(db.dsn(), "acme", 1)
    _fill(db.dsn(), "globex", 2)
    before_globex = _answers(db.dsn(), "globex")
    with psycopg.connect(db.dsn()) as admin:
        globex = (admin.execute(COUNTS_SQL, {"t": "globex"}).fetchone(), admin.execute(GRAPH_SQL, {"t": "globex"}).fetchone())
    with HybridClient(db.dsn()) as c:
        removed = c.drop_tenant("acme")
    # 12 + 5 + 1 + 1 chunks (the 3 superseded ones too), 2 corpora, 5 nodes and vertices, 4 edges, 2 grants
    assert removed == {"chunks": 19, "corpora": 2, "graph_nodes": 5, "vertices": 5, "edges": 4, "grants": 2}
    with psycopg.connect(db.dsn()) as admin:
        assert admin.execute(COUNTS_SQL, {"t": "acme"}).fetchone() == (0, 0, 0, 0)
        assert admin.execute(GRAPH_SQL, {"t": "acme"}).fetchone() == (0, 0, 0)
        assert (admin.execute(COUNTS_SQL, {"t": "globex"}).fetchone(), admin.execute(GRAPH_SQL, {"t": "globex"}).fetchone()) == globex
    assert _answers(db.dsn(), "globex") == before_globex
    # the role bound to it now acts for no tenant
    with psycopg.connect(db.dsn("pyh_acme")) as conn:
        assert conn.execute("SELECT hybrid._current_tenant()").fetchone() == (None,)


def test_drop_tenant_is_for_admins_only_and_names_a_missing_tenant(db: Db) -> None:
    for role in ("pyh_app", "pyh_acme"):
        with HybridClient(db.dsn(role)) as c, pytest.raises(TenantError):
            c.drop_tenant("globex")
    with HybridClient(db.dsn()) as c:
        with pytest.raises(InvalidParameterError, match="tenant_id 'nosuch' does not exist"):
            c.drop_tenant("nosuch")
        assert c.drop_tenant("globex")["chunks"] == 0


@pytest.mark.usefixtures("require_age")
def test_export_then_import_on_another_server_gives_the_same_answers(db: Db, db2: Db, tmp_path: Path) -> None:
    _fill(db.dsn(), "acme", 1)
    path = tmp_path / "acme.jsonl.gz"
    floor = 0.25  # as hybrid.calibrate_abstention stores it (which needs 20 chunks; acme holds 16)
    with psycopg.connect(db.dsn()) as admin:
        admin.execute("UPDATE hybrid.tenant SET abstain_floor = %s WHERE tenant_id = 'acme'", (floor,))
    with HybridClient(db.dsn()) as c:
        assert export_tenant(c, "acme", path) == {"corpora": 2, "chunks": 16, "edges": 4}
    lines = [json.loads(x) for x in gzip.open(path, "rt")]
    assert lines[0]["format"] == "pyhybrid-tenant" and lines[0]["tenant_id"] == "acme"
    assert lines[0]["abstain_floor"] == floor and lines[0]["abstain_floor_of"] == "mean of the ten best dense hits"
    assert not any("tenant_id" in (r.get("properties") or {}) for r in lines if r.get("type") == "edge")
    with psycopg.connect(db2.dsn()) as admin:  # the other server has never seen acme's rows
        admin.execute("DELETE FROM hybrid.tenant_grant WHERE tenant_id = 'acme'")
    with HybridClient(db2.dsn()) as c:
        assert import_tenant(c, path) == {"corpora": 2, "chunks": 16, "edges": 4}
    assert _answers(db2.dsn(), "acme") == _answers(db.dsn(), "acme")
    with psycopg.connect(db.dsn()) as a, psycopg.connect(db2.dsn()) as b:
        # the abstention floor came along: abstain=True answers there without a new calibration
        floor_sql = "SELECT abstain_floor FROM hybrid.tenant WHERE tenant_id = 'acme'"
        assert b.execute(floor_sql).fetchone() == a.execute(floor_sql).fetchone() == (floor,)
        near = json.loads(b.execute("SELECT embedding::text FROM hybrid.chunk WHERE chunk_id = 'acme-a-0'").fetchone()[0])
    with HybridClient(db2.dsn()) as c, c.tenant("acme") as t:  # raised 55000 (no floor) before the floor travelled
        assert [r.chunk_id for r in t.retrieve(query_embedding=near, abstain=True, top_k=1)] == ["acme-a-0"]
        with pytest.warns(AbstainedWarning, match="below tenant acme's floor"):
            assert t.retrieve(query_embedding=unit(1), abstain=True) == []
    with psycopg.connect(db.dsn()) as a, psycopg.connect(db2.dsn()) as b:
        q = ("SELECT chunk_id, document_id, corpus_id, content, embedding::text, position, metadata, acl_labels, "
             "content_hash FROM hybrid.chunk WHERE tenant_id = 'acme' AND NOT superseded ORDER BY chunk_id")
        assert a.execute(q).fetchall() == b.execute(q).fetchall()
        # vertex ids are the importing server's own
        assert b.execute("SELECT count(*) FROM hybrid.graph_node WHERE tenant_id = 'acme'").fetchone() == (5,)


@pytest.mark.usefixtures("require_age")
def test_import_under_another_id_beside_the_original(db: Db, tmp_path: Path) -> None:
    _fill(db.dsn(), "acme", 1)
    path = tmp_path / "acme.jsonl"
    with HybridClient(db.dsn()) as c:
        export_tenant(c, "acme", path)
        assert import_tenant(c, path, "acme-copy")["chunks"] == 16
    with HybridClient(db.dsn()) as c, c.tenant("acme-copy") as t:
        ids = {r.chunk_id for r in t.retrieve(graph_seeds=["acme-a-1"], graph_hops=2, top_k=20)}
    assert ids == {"acme-a-2", "acme-b-0"}  # the restricted chunk stays hidden without its label


def test_import_refuses_a_tenant_with_data_a_wrong_dimension_and_a_bad_file_writing_nothing(
        db: Db, tmp_path: Path) -> None:
    _fill_plain = chunks("x", 3, seed=4)
    with HybridClient(db.dsn()) as c:
        with c.tenant("acme") as t:
            t.ingest(_fill_plain)
        path = tmp_path / "acme.jsonl"
        export_tenant(c, "acme", path)
        with pytest.raises(InvalidParameterError, match="already holds 3 chunks"):
            import_tenant(c, path)
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        (tmp_path / "dim.jsonl").write_text(json.dumps({**header, "embedding_dim": 7}) + "\n")
        with pytest.raises(InvalidParameterError, match="embedding_dim"):
            import_tenant(c, tmp_path / "dim.jsonl", "fresh1")
        (tmp_path / "bad.jsonl").write_text("\n".join(lines[:3] + ['{"type": "chunk", "chunk_id": "z"}']) + "\n")
        with pytest.raises(InvalidParameterError, match=r"bad.jsonl:4"):
            import_tenant(c, tmp_path / "bad.jsonl", "fresh2")
        (tmp_path / "floor.jsonl").write_text("\n".join([json.dumps({**header, "abstain_floor": "high"})] + lines[1:]) + "\n")
        with pytest.raises(InvalidParameterError, match=r"abstain_floor must be a cosine similarity"):
            import_tenant(c, tmp_path / "floor.jsonl", "fresh4")
        (tmp_path / "other.jsonl").write_text('{"hello": 1}\n')
        with pytest.raises(InvalidParameterError, match="not a pyhybrid-tenant export"):
            import_tenant(c, tmp_path / "other.jsonl", "fresh3")
    with psycopg.connect(db.dsn()) as admin:
        assert admin.execute("SELECT count(*) FROM hybrid.tenant WHERE tenant_id LIKE 'fresh%'").fetchone() == (0,)


def test_an_export_made_before_the_ten_best_hits_floor_imports_its_floor_rescaled(db: Db, tmp_path: Path) -> None:
    # an export without abstain_floor_of holds the best hit's floor (0.73 x the neighbour median): imported, it is
    # the ten best hits' (0.60 x), as revision 0027 rescales a database's floors
    with HybridClient(db.dsn()) as c:
        with c.tenant("acme") as t:
            t.ingest(chunks("x", 3, seed=4))
        with psycopg.connect(db.dsn()) as admin:
            admin.execute("UPDATE hybrid.tenant SET abstain_floor = 0.73 WHERE tenant_id = 'acme'")
        path = tmp_path / "acme.jsonl"
        export_tenant(c, "acme", path)
        lines = path.read_text().splitlines()
        header = {k: v for k, v in json.loads(lines[0]).items() if k != "abstain_floor_of"}
        (tmp_path / "old.jsonl").write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n")
        import_tenant(c, tmp_path / "old.jsonl", "old")
        import_tenant(c, path, "new")
    with psycopg.connect(db.dsn()) as admin:
        assert admin.execute("SELECT tenant_id, abstain_floor FROM hybrid.tenant WHERE tenant_id IN ('old', 'new') "
                             "ORDER BY 1").fetchall() == [("new", 0.73), ("old", pytest.approx(0.60))]


# --- many tenants: listing them a page a transaction (issue 51: a transaction over every tenant runs out of locks)

def _partitions_locked(c: psycopg.Connection[Any]) -> int:
    return int(c.execute("SELECT count(*) FROM pg_locks l JOIN pg_class k ON k.oid = l.relation "
                         "WHERE l.pid = pg_backend_pid() AND k.relname ~ '^chunk_p[0-9]+$'").fetchone()[0])


def test_tenants_come_a_page_at_a_time_each_page_locking_only_its_own_partitions(
        db: Db, monkeypatch: pytest.MonkeyPatch) -> None:
    with psycopg.connect(db.dsn(), autocommit=True) as c:
        for i in range(40):
            c.execute("SELECT hybrid.create_tenant(%s, NULL, 'dedicated')", (f"t{i:03d}",))
    with HybridClient(db.dsn("pyh_app")) as client, client.tenant("acme") as t:
        t.ingest(chunks("a", 3))
    with psycopg.connect(db.dsn()) as c:  # one transaction
        whole = c.execute("SELECT * FROM hybrid.tenants()").fetchall()
        assert len(whole) == 42 and _partitions_locked(c) == 42  # what ran out of lock slots at a few thousand
    with psycopg.connect(db.dsn()) as c:
        assert len(c.execute("SELECT * FROM hybrid.tenants(NULL, 10)").fetchall()) == 10
        assert _partitions_locked(c) == 10
        c.rollback()
        pages, after = [], None
        while True:
            page = c.execute("SELECT * FROM hybrid.tenants(%s, 10)", (after,)).fetchall()
            c.rollback()
            pages += page
            if len(page) < 10:
                break
            after = page[-1][0]
        assert pages == whole
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="max_tenants"):
            c.execute("SELECT * FROM hybrid.tenants(NULL, 0)")
    # the client pages by itself (here 7 a page), each page a transaction of its own
    from pyhybrid import _sql
    monkeypatch.setattr(_sql, "TENANTS_PAGE", 7)
    with HybridClient(db.dsn()) as client:
        listed = client.tenants()
    assert [(r["tenant_id"], r["chunks"]) for r in listed] == [(w[0], w[4]) for w in whole]
    assert next(r for r in listed if r["tenant_id"] == "acme")["chunks"] == 3


def test_doctors_dense_audit_count_is_the_same_by_batches(db: Db, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyhybrid import doctor
    with psycopg.connect(db.dsn(), autocommit=True) as c:
        for i in range(9):
            c.execute("SELECT hybrid.create_tenant(%s, NULL, 'dedicated')", (f"t{i:03d}",))
        whole = doctor._audit_samples(c)
        monkeypatch.setattr(doctor, "_AUDIT_BATCH", 2)
        assert doctor._audit_samples(c) == whole


def test_re_applying_the_sql_locks_no_secured_partition_and_repairs_a_weakened_one(db: Db) -> None:
    with psycopg.connect(db.dsn(), autocommit=True) as c:
        for i in range(20):
            c.execute("SELECT hybrid.create_tenant(%s, NULL, 'dedicated')", (f"t{i:03d}",))
        parts = [r[0] for r in c.execute("SELECT inhrelid::regclass::text FROM pg_inherits "
                                         "WHERE inhparent = 'hybrid.chunk'::regclass "
                                         "AND inhrelid <> 'hybrid.chunk_pool'::regclass ORDER BY 1").fetchall()]
        assert len(parts) == 22
        secured = "SELECT hybrid._chunks_secured(%s::regclass)"
        assert all(c.execute(secured, (p,)).fetchone()[0] for p in parts)
        # each way a partition can be weakened is seen
        weak = parts[:5]
        c.execute(f"DROP POLICY chunk_select ON {weak[0]}")
        c.execute(f"ALTER TABLE {weak[1]} NO FORCE ROW LEVEL SECURITY")
        c.execute(f"GRANT SELECT ON {weak[2]} TO PUBLIC")
        c.execute(f"ALTER POLICY chunk_delete ON {weak[3]} USING (true)")
        c.execute(f"REVOKE SELECT ON {weak[4]} FROM hybrid_definer")
        assert [c.execute(secured, (p,)).fetchone()[0] for p in parts] == [False] * 5 + [True] * 17
    with psycopg.connect(db.dsn()) as c:  # what sql/idempotent/020_policies.sql runs, in one transaction
        c.execute("SELECT hybrid._secure_chunks(i.inhrelid::regclass) FROM pg_inherits i "
                  "WHERE i.inhparent = 'hybrid.chunk'::regclass "
                  "AND NOT coalesce(hybrid._chunks_secured(i.inhrelid::regclass), false)")
        locked = c.execute("SELECT array_agg(DISTINCT k.oid::regclass::text) FROM pg_locks l "
                           "JOIN pg_class k ON k.oid = l.relation WHERE l.pid = pg_backend_pid() "
                           "AND k.relname ~ '^chunk_p[0-9]+$'").fetchone()[0]
        assert sorted(locked) == sorted(weak)  # the weakened ones alone: none of the secured 17
        c.commit()
        assert all(c.execute(secured, (p,)).fetchone()[0] for p in parts)
