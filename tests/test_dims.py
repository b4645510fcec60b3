"""Embeddings wider than pgvector's 2,000-dimension HNSW limit for vector: halfvec (3,072) and binary codes (4,096)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Iterator

import numpy as np
import psycopg
import pytest
from psycopg import conninfo

from pyhybrid import Chunk, HybridClient, InvalidParameterError, migrate
from pyhybrid.cli import main
from pyhybrid.transfer import export_tenant, import_tenant
from tests.conftest import Db

pytestmark = pytest.mark.slow  # servers, binaries or releases of its own: the full tier only

N = 300  # chunks of acme: over the exact-search threshold of 500 only with exact_threshold => 0
CLUSTERS = 15
KIND = {3072: ("halfvec", "halfvec_cosine_ops"), 4096: ("bit", "bit_hamming_ops")}


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def corpus(dim: int, seed: int = 7) -> tuple[list[Chunk], np.ndarray]:
    """N unit vectors around CLUSTERS centres (as embeddings of related texts lie), and 20 queries near them."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CLUSTERS, dim))
    vecs = [_unit(centres[i % CLUSTERS] + 1.2 * rng.standard_normal(dim)) for i in range(N)]
    queries = np.stack([_unit(centres[q % CLUSTERS] + 1.2 * rng.standard_normal(dim)) for q in range(20)])
    chunks = [Chunk(chunk_id=f"c{i}", document_id=f"d{i}", embedding=vecs[i],
                    content=f"chunk {i} of cluster k{i % CLUSTERS} about pumps" + (" and a falcon" if i % 50 == 0 else ""))
              for i in range(N)]
    return chunks, queries


def _dsn(base: str, role: str | None = None) -> str:
    return base if role is None else conninfo.make_conninfo(base, user=role, password=role)


@pytest.fixture(scope="module", params=[3072, 4096])
def wide(request: pytest.FixtureRequest, admin_dsn: str, template_db: str) -> Iterator[tuple[int, str, np.ndarray]]:
    """A fresh install of dim dimensions (migrate(dim=...)): tenants acme (N chunks) and globex (the
    same vectors under other ids), the test roles; yields (dim, admin DSN, the queries)."""
    dim = int(request.param)
    name = f"pyh_dims_{dim}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    dsn = conninfo.make_conninfo(admin_dsn, dbname=name)
    try:
        migrate.upgrade(dsn, dim=dim)
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("SELECT hybrid.create_tenant('acme', NULL, 'dedicated'), hybrid.create_tenant('globex', NULL, 'dedicated')")
            c.execute("SELECT hybrid.grant_app('pyh_app')")
            c.execute("SELECT hybrid.grant_tenant('pyh_acme', 'acme'), hybrid.grant_tenant('pyh_globex', 'globex')")
        chunks, queries = corpus(dim)
        with HybridClient(_dsn(dsn, "pyh_app")) as client:
            with client.tenant("acme") as t:
                assert t.ingest(chunks).inserted == N
            with client.tenant("globex") as t:
                t.ingest([Chunk(chunk_id=f"g{i}", document_id=f"g{i}", content=c.content, embedding=c.embedding)
                          for i, c in enumerate(chunks)])
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("VACUUM ANALYZE hybrid.chunk")
        yield dim, dsn, queries
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _dense(dsn: str, q: np.ndarray, k: int, exact_threshold: int, role: str = "pyh_acme") -> list[tuple[str, float]]:
    with psycopg.connect(_dsn(dsn, role)) as c:
        rows = c.execute("SELECT chunk_id, value FROM hybrid.search_dense(%s::vector, %s, exact_threshold => %s) "
                         "ORDER BY rank", (q.tolist(), k, exact_threshold)).fetchall()
    return [(str(r[0]), float(r[1])) for r in rows]


def test_a_wide_install_indexes_every_partition_with_the_kind_its_dimension_needs(wide: tuple[int, str, np.ndarray]) -> None:
    dim, dsn, _ = wide
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute("SELECT hybrid.embedding_dim(), format_type(atttypid, atttypmod), attstorage FROM pg_attribute "
                         "WHERE attrelid = 'hybrid.chunk'::regclass AND attname = 'embedding'").fetchone() == (
            dim, f"vector({dim})", "m")
        c.execute("SELECT hybrid.create_tenant('initech', NULL, 'dedicated')")  # a partition attached after install
        defs = c.execute(
            "SELECT x.indrelid::regclass::text, o.opcname, pg_get_expr(x.indexprs, x.indrelid) FROM pg_index x "
            "JOIN pg_opclass o ON o.oid = x.indclass[0] WHERE x.indexrelid = 'hybrid.chunk_embedding_hnsw'::regclass "
            "OR x.indexrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'hybrid.chunk_embedding_hnsw'::regclass) "
            "ORDER BY 1").fetchall()
    expr = (f"(embedding)::halfvec({dim})" if dim <= 4000 else f"(binary_quantize(embedding))::bit({dim})")
    assert [(t, o, e) for t, o, e in defs] == [(t, KIND[dim][1], expr) for t in
                                               ("hybrid.chunk", "hybrid.chunk_p1", "hybrid.chunk_p2", "hybrid.chunk_p3",
                                                "hybrid.chunk_pool")]


def test_wide_dense_search_runs_through_the_hnsw_index_of_the_callers_partition(wide: tuple[int, str, np.ndarray]) -> None:
    dim, dsn, queries = wide

    def scans(exact_threshold: int) -> dict[str, int]:
        def snapshot(c: psycopg.Connection[object]) -> dict[str, int]:
            c.execute("SELECT pg_stat_clear_snapshot()")
            return {str(r[0]): int(r[1]) for r in c.execute(
                "SELECT relname, coalesce(idx_scan, 0) + coalesce(seq_scan, 0) FROM pg_stat_all_tables "
                "WHERE schemaname = 'hybrid' AND relname LIKE 'chunk_p%' UNION ALL "
                "SELECT indexrelname, idx_scan FROM pg_stat_all_indexes WHERE schemaname = 'hybrid' "
                "AND indexrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'hybrid.chunk_embedding_hnsw'::regclass)"
            ).fetchall()}

        with psycopg.connect(dsn, autocommit=True) as admin:
            before = snapshot(admin)
            with psycopg.connect(_dsn(dsn, "pyh_acme")) as c:
                assert len(c.execute("SELECT * FROM hybrid.search_dense(%s::vector, 10, exact_threshold => %s)",
                                     (queries[0].tolist(), exact_threshold)).fetchall()) == 10
                c.execute("SELECT pg_stat_force_next_flush()")
            after = snapshot(admin)
        return {k: after[k] - before.get(k, 0) for k in after if after[k] > before.get(k, 0)}

    with psycopg.connect(dsn) as c:
        index = c.execute("SELECT relname FROM pg_class WHERE oid = (SELECT inhrelid FROM pg_inherits i JOIN pg_index x "
                          "ON x.indexrelid = i.inhrelid WHERE i.inhparent = 'hybrid.chunk_embedding_hnsw'::regclass "
                          "AND x.indrelid = 'hybrid.chunk_p1'::regclass)").fetchone()
    assert index is not None
    # acme is chunk_p1: its HNSW index once, and the audit's sample (chunk_audit_sample_idx) once; no scan of
    # globex's chunk_p2; within exact_threshold, no HNSW index
    assert scans(0) == {"chunk_p1": 2, index[0]: 1}
    assert index[0] not in scans(1_000_000)


def test_a_wide_install_keeps_the_tsvector_out_of_line(wide: tuple[int, str, np.ndarray]) -> None:
    # revision 0026 keeps tsv in the row only where a vector leaves room for two rows a page (up to 500 dimensions):
    # past that a row with its tsv would take a page of its own, so the tsv stays EXTERNAL at PostgreSQL's target
    _, dsn, _ = wide
    with psycopg.connect(dsn) as c:
        storage = c.execute("SELECT DISTINCT a.attstorage FROM pg_partition_tree('hybrid.chunk') t "
                            "JOIN pg_attribute a ON a.attrelid = t.relid AND a.attname = 'tsv'").fetchall()
        options = c.execute("SELECT count(*) FROM pg_partition_tree('hybrid.chunk') t JOIN pg_class k ON k.oid = t.relid "
                            "WHERE k.reloptions IS NOT NULL").fetchone()
    assert storage == [("e",)]
    assert options == (0,)


@pytest.mark.parametrize("ef_search", [None, 20])
def test_wide_dense_search_finds_the_exact_neighbours_with_their_exact_distances(
        wide: tuple[int, str, np.ndarray], ef_search: int | None) -> None:
    dim, dsn, queries = wide
    with psycopg.connect(dsn, autocommit=True) as c:  # 20: the narrowest search, 40 binary candidates for 10
        c.execute("DELETE FROM hybrid.setting WHERE key = 'hnsw_ef_search'")
        if ef_search is not None:
            c.execute("INSERT INTO hybrid.setting (key, value) VALUES ('hnsw_ef_search', %s)", (str(ef_search),))
    recalls = []
    try:
        for q in queries:
            exact = _dense(dsn, q, 10, 1_000_000)
            approx = _dense(dsn, q, 10, 0)
            assert len(approx) == 10
            recalls.append(len({i for i, _ in exact} & {i for i, _ in approx}) / 10)
            truth = dict(exact)
            for chunk_id, d in approx:  # the cosine distance of the vectors, not of their halfvec or binary codes
                if chunk_id in truth:
                    assert d == pytest.approx(truth[chunk_id], abs=1e-6)
            assert [d for _, d in approx] == sorted(d for _, d in approx)
    finally:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("DELETE FROM hybrid.setting WHERE key = 'hnsw_ef_search'")
    print(f"recall@10 at {dim}, ef_search {ef_search}: mean {np.mean(recalls):.3f}, min {min(recalls):.1f}")
    assert min(recalls) >= 0.8 and np.mean(recalls) >= 0.95, recalls


def test_a_wide_tenant_never_sees_another_tenants_chunks(wide: tuple[int, str, np.ndarray]) -> None:
    _, dsn, queries = wide
    # globex holds the same vectors: the nearest of all are as near as acme's own
    for role in ("pyh_acme", "pyh_globex"):
        ids = [i for i, _ in _dense(dsn, queries[3], 50, 0, role=role)]
        assert len(ids) == 50 and all(i.startswith("c" if role == "pyh_acme" else "g") for i in ids), ids


@pytest.mark.usefixtures("require_bm25")
def test_wide_hybrid_retrieval_fuses_dense_and_bm25_and_explains_its_plan(wide: tuple[int, str, np.ndarray]) -> None:
    dim, dsn, queries = wide
    with psycopg.connect(dsn, autocommit=True) as c:
        # through the HNSW index: the exact threshold is the larger of exact_threshold and the audit's sample
        c.execute("INSERT INTO hybrid.setting (key, value) VALUES ('exact_threshold', '0'), ('dense_audit_rows', '0')")
    try:
        with HybridClient(_dsn(dsn, "pyh_acme")) as client, client.tenant("acme") as t:
            q = queries[0]  # near cluster k0: chunks 0, 15, 30, ...; "falcon" is in chunks 0, 50, ... only
            dense = [r.chunk_id for r in t.retrieve(q.tolist(), top_k=10)]
            assert set(dense) == {i for i, _ in _dense(dsn, q, 10, 1_000_000)}
            both = t.retrieve(q.tolist(), query_text="falcon", top_k=5)
            # c0 and c150 are near (cluster k0) and name the falcon: first in both branches
            assert {r.chunk_id for r in both[:2]} == {"c0", "c150"}
            report = t.explain_retrieve(q.tolist(), query_text="falcon", top_k=5)
            plans = {b["branch"]: b["plan"] for b in report["branches"]}
            kind = "on halfvec copies (exact cosine re-rank)" if dim <= 4000 else "on binary codes (exact cosine re-rank)"
            assert plans["dense"].startswith(f"HNSW index {kind}, ef_search "), plans["dense"]
            assert plans["lexical"].startswith("BM25 index") and "scores: " in plans["lexical"]
            many = t.retrieve_many(["falcon", "pumps k0"], [q.tolist(), q.tolist()], top_k=5)
            assert {r.chunk_id for r in many[:2]} == {"c0", "c150"}
    finally:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("DELETE FROM hybrid.setting WHERE key IN ('exact_threshold', 'dense_audit_rows')")


def test_a_wide_tenant_exports_and_imports_whole(wide: tuple[int, str, np.ndarray], tmp_path: Path) -> None:
    dim, dsn, queries = wide
    path = tmp_path / "acme.jsonl.gz"
    with HybridClient(dsn) as c:
        assert export_tenant(c, "acme", path)["chunks"] == N
        assert import_tenant(c, path, "acme-copy")["chunks"] == N
    try:
        with psycopg.connect(dsn) as c:
            # the copy's vectors are the originals, bit for bit
            assert c.execute("SELECT count(*) FROM hybrid.chunk a JOIN hybrid.chunk b ON b.chunk_id = a.chunk_id "
                             "WHERE a.tenant_id = 'acme' AND b.tenant_id = 'acme-copy' AND a.embedding = b.embedding"
                             ).fetchone() == (N,)
        with HybridClient(_dsn(dsn, "pyh_app")) as client, client.tenant("acme-copy") as t:
            got = t.conn.execute("SELECT chunk_id FROM hybrid.search_dense(%s::vector, 10, exact_threshold => 0) "
                                 "ORDER BY rank", (queries[1].tolist(),)).fetchall()
        assert [r["chunk_id"] for r in got] == [i for i, _ in _dense(dsn, queries[1], 10, 0)]
    finally:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("SELECT hybrid.drop_tenant('acme-copy')")


def test_doctor_names_the_wide_index_kind_and_reapply_keeps_it(wide: tuple[int, str, np.ndarray]) -> None:
    from pyhybrid.doctor import check

    dim, dsn, queries = wide
    assert main(["--dsn", dsn, "migrate", "--reapply"]) == 0
    with psycopg.connect(dsn) as c:
        findings = {f.subject: f for f in check(c)}
    kind, opclass = KIND[dim]
    assert findings["dense index kind"].state.startswith(f"{kind} (") and opclass in findings["dense index kind"].state
    assert not findings["dense index kind"].problem
    assert f"embedding dim {dim}" in findings["schema hybrid"].state
    assert [i for i, _ in _dense(dsn, queries[2], 10, 0)] == [i for i, _ in _dense(dsn, queries[2], 10, 0)]


def test_the_dimension_must_be_between_1_and_16000_and_is_refused_before_anything_is_written(
        empty_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    for dim in (0, 16001):
        with pytest.raises(InvalidParameterError, match=rf"^dim must be between 1 and 16000 .*, got {dim}$"):
            migrate.upgrade(empty_db, dim=dim)
    assert main(["--dsn", empty_db, "migrate", "--dim", "20000"]) == 2
    assert "--dim must be between 1 and 16000 (pgvector's vector limit" in capsys.readouterr().err
    with psycopg.connect(empty_db) as c:
        assert c.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'hybrid'").fetchone() == (0,)


def test_a_wide_dimension_is_refused_on_an_installed_database(db: Db, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dsn", db.dsn(), "migrate", "--dim", "4096"]) == 2
    assert "--dim 4096: this install stores 384-dimension embeddings" in capsys.readouterr().err
    migrate.upgrade(db.dsn(), dim=4096)  # the library keeps an installed dimension: dim applies to a fresh install only
    with psycopg.connect(db.dsn()) as c:
        assert c.execute("SELECT hybrid.embedding_dim(), format_type(atttypid, atttypmod) FROM pg_attribute "
                         "WHERE attrelid = 'hybrid.chunk'::regclass AND attname = 'embedding'").fetchone() == (384, "vector(384)")


def test_a_wide_database_restores_from_pg_dump_and_answers_as_before(wide: tuple[int, str, np.ndarray], admin_dsn: str,
                                                                      tmp_path: Path) -> None:
    import subprocess

    import pgserver

    dim, dsn, queries = wide
    bin_dir = Path(pgserver.__file__).parent / "pginstall" / "bin"
    name = f"pyh_dims_r_{uuid.uuid4().hex[:8]}"
    restored = conninfo.make_conninfo(admin_dsn, dbname=name)
    with psycopg.connect(admin_dsn, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    try:  # the steps of docs/operations.md's "Backup and restore", into another database of this server
        subprocess.run([str(bin_dir / "pg_dump"), "-Fc", "-f", str(tmp_path / "wide.dump"), "-d", dsn], check=True)
        subprocess.run([str(bin_dir / "pg_restore"), "-d", restored, str(tmp_path / "wide.dump")], check=True)
        assert main(["--dsn", restored, "migrate", "--reapply"]) == 0
        for q in queries[:5]:
            assert _dense(restored, q, 10, 0) == _dense(dsn, q, 10, 0)
        with psycopg.connect(restored) as c:
            assert c.execute("SELECT o.opcname FROM pg_index x JOIN pg_opclass o ON o.oid = x.indclass[0] "
                             "WHERE x.indexrelid = 'hybrid.chunk_embedding_hnsw'::regclass").fetchone() == (KIND[dim][1],)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("dim, opclass", [(2000, "vector_cosine_ops"), (2001, "halfvec_cosine_ops"),
                                          (4000, "halfvec_cosine_ops"), (4001, "bit_hamming_ops")])
def test_each_dimension_gets_the_index_kind_of_its_range_and_searches(empty_db: str, template_db: str, dim: int,
                                                                      opclass: str) -> None:
    migrate.upgrade(empty_db, dim=dim)
    with psycopg.connect(empty_db, autocommit=True) as c:
        c.execute("SELECT hybrid.create_tenant('acme', NULL, 'dedicated'), hybrid.grant_tenant('pyh_acme_writer', 'acme', ARRAY['*'])")
        assert c.execute("SELECT o.opcname FROM pg_index x JOIN pg_opclass o ON o.oid = x.indclass[0] WHERE x.indrelid = "
                         "'hybrid.chunk_p1'::regclass AND x.indexrelid IN (SELECT inhrelid FROM pg_inherits "
                         "WHERE inhparent = 'hybrid.chunk_embedding_hnsw'::regclass)").fetchone() == (opclass,)
    rng = np.random.default_rng(dim)
    vecs = [_unit(rng.standard_normal(dim)) for _ in range(5)]
    with HybridClient(_dsn(empty_db, "pyh_acme_writer")) as client, client.tenant("acme") as t:
        t.ingest([Chunk(chunk_id=f"c{i}", document_id=f"d{i}", content=f"chunk {i}", embedding=v) for i, v in enumerate(vecs)])
    assert [i for i, _ in _dense(empty_db, vecs[3], 5, 0, role="pyh_acme_writer")][0] == "c3"


def test_a_downgrade_below_revision_0011_is_refused_on_a_wide_install_and_changes_nothing(
        wide: tuple[int, str, np.ndarray]) -> None:
    dim, dsn, queries = wide
    with pytest.raises(RuntimeError, match=f"this database stores {dim}-dimension embeddings; releases before revision 0011"):
        migrate.downgrade(dsn, revision="0009")
    with psycopg.connect(dsn) as c:
        assert migrate.is_current(c)
    assert len(_dense(dsn, queries[0], 10, 0)) == 10
