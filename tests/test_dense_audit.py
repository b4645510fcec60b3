"""The dense branch's audit: an HNSW list that a sample of the partition proves wrong is searched again at pgvector's
widest breadth, and replaced by an exact search where that list is wrong too."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from pyhybrid import Chunk, HybridClient, migrate
from pyhybrid.doctor import check
from tests.conftest import Db

DIM = 384
N = 3000


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _fill(db: Db) -> tuple[np.ndarray, np.ndarray]:
    """acme: N vectors in 150 tight topic clusters of 5 to 35 chunks, indexed by a deliberately poor HNSW graph (m 8,
    ef_construction 16) searched at ef_search 20: the beam often misses a query's cluster. Returns vectors, queries."""
    rng = np.random.default_rng(11)
    centres = rng.standard_normal((150, DIM))
    sizes = rng.integers(5, 36, size=150)
    cluster = np.repeat(np.arange(150), sizes)[:N]
    cluster = np.concatenate([cluster, rng.integers(0, 150, size=N - len(cluster))])
    vecs = np.stack([_unit(centres[c] + 0.35 * rng.standard_normal(DIM)) for c in cluster])
    queries = np.stack([_unit(centres[c] + 0.35 * rng.standard_normal(DIM)) for c in rng.integers(0, 150, size=40)])
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
        t.ingest([Chunk(chunk_id=f"c{i}", document_id=f"d{i // 4}", position=i % 4, content=f"chunk {i}",
                        embedding=vecs[i], metadata={"g": i % 50}) for i in range(N)])
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        admin.execute("VACUUM ANALYZE hybrid.chunk")
        admin.execute("INSERT INTO hybrid.setting (key, value) VALUES ('hnsw_m', '8'), ('hnsw_ef_construction', '16'), "
                      "('hnsw_ef_search', '20')")
        admin.execute("SELECT hybrid.suspend_vector_index()")
        admin.execute("SELECT hybrid.resume_vector_index()")
    return vecs, queries


def _set_audit(db: Db, rows: str | None) -> None:
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        admin.execute("DELETE FROM hybrid.setting WHERE key = 'dense_audit_rows'")
        if rows is not None:
            admin.execute("INSERT INTO hybrid.setting (key, value) VALUES ('dense_audit_rows', %s)", (rows,))


def _search(db: Db, queries: np.ndarray, threshold: int | None = 0, k: int = 10, filter: str | None = None,
            max_scan_tuples: int | None = None) -> list[tuple[list[int], str]]:
    """search_dense's top k of each query as acme's reader, and what the audit did (exact_threshold 0: through the
    HNSW index whatever the audit's sample; None: the settings', where a partition within the sample is exact)."""
    out = []
    with psycopg.connect(db.dsn("pyh_acme")) as c:
        if max_scan_tuples is not None:
            c.execute(f"SET hnsw.max_scan_tuples = {int(max_scan_tuples)}")
        for q in queries:
            with c.transaction():
                ids = [int(r[0][1:]) for r in c.execute(
                    "SELECT chunk_id FROM hybrid.search_dense(%s::vector, %s, filter => %s::jsonb, exact_threshold => %s) "
                    "ORDER BY rank", (q.tolist(), k, filter, threshold)).fetchall()]
                out.append((ids, c.execute("SELECT current_setting('hybrid.dense_audit', true)").fetchone()[0]))  # type: ignore[index]
    return out


def test_an_hnsw_list_that_misses_nearer_chunks_is_replaced_by_the_exact_top_k(db: Db) -> None:
    vecs, queries = _fill(db)
    exact = [list(np.argsort(-(vecs @ q), kind="stable")[:10]) for q in queries]
    _set_audit(db, "0")  # no audit: the poor graph's own lists
    plain = _search(db, queries)
    assert {a for _, a in plain} == {"off"}
    missed = [i for i, (ids, _) in enumerate(plain) if set(ids) != set(exact[i])]
    assert len(missed) >= 5, f"the graph must miss for this test to prove anything: {len(missed)} of {len(queries)}"
    _set_audit(db, str(N))  # the whole partition sampled: every miss inside the top 10 is seen
    audited = _search(db, queries)
    assert [set(ids) for ids, _ in audited] == [set(e) for e in exact]
    assert [i for i, (_, a) in enumerate(audited) if a.startswith("failed")] == missed
    assert {a for i, (_, a) in enumerate(audited) if i not in missed} == {"passed"}
    # each miss is repaired by the wider list (ef_search 1000 on this graph of 3,000 chunks) or, where that list
    # fails the audit too, by the exact scan; the counts printed, the outcomes asserted
    repaired = [a for i, (_, a) in enumerate(audited) if i in missed]
    print({a: repaired.count(a) for a in set(repaired)})
    assert set(repaired) <= {"failed: widened to ef_search 1000", "failed: searched exactly"}
    assert "failed: widened to ef_search 1000" in repaired
    _set_audit(db, None)  # the default, 1,000 sampled rows of 3,000: never worse than no audit
    default = _search(db, queries)
    assert all(len(set(d) & set(e)) >= len(set(p) & set(e)) for (d, _), (p, _), e in zip(default, plain, exact))
    assert sum(set(d) == set(e) for (d, _), e in zip(default, exact)) > len(queries) - len(missed)
    # without the argument, a partition within the sample is searched exactly: the audit would read it all
    _set_audit(db, str(N))
    assert [set(ids) for ids, _ in _search(db, queries, None)] == [set(e) for e in exact]
    # explain_retrieve names the audit's outcome beside the HNSW breadth (per_source_k 10: the same list)
    _set_audit(db, str(N - 1))
    outcome = [a for _, a in _search(db, queries, None)]
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
        shown = [str(t.explain_retrieve(query_embedding=queries[outcome.index(a)], per_source_k=10))
                 for a in ("failed: widened to ef_search 1000", "passed")]
    assert "ef_search 20, audit failed: widened to ef_search 1000" in shown[0], shown[0]
    assert "ef_search 20, audit passed" in shown[1], shown[1]
    with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:  # and a partition within the sample
        _set_audit(db, str(N))
        assert [b["plan"] for b in t.explain_retrieve(query_embedding=queries[0])["branches"]] == ["exact scan"]


def test_a_malformed_audit_setting_is_refused_by_name(db: Db) -> None:
    vecs, queries = _fill(db)
    _set_audit(db, "some")
    with psycopg.connect(db.dsn("pyh_acme")) as c:
        with pytest.raises(psycopg.errors.InvalidParameterValue,
                           match="setting dense_audit_rows must be a non-negative integer, got 'some'"):
            c.execute("SELECT * FROM hybrid.search_dense(%s::vector, 10)", (queries[0].tolist(),))


def test_a_list_shorter_than_top_k_is_audited_against_any_visible_chunk_outside_it(db: Db) -> None:
    # a selective filter on an HNSW scan that may stop early (hnsw.max_scan_tuples, 20,000 by default: here 1, so
    # the scan ends with the candidates its first search visited) comes back short; one chunk in fifty matches
    vecs, queries = _fill(db)
    match = np.arange(N) % 50 == 3
    exact = [[int(j) for j in np.argsort(-(vecs @ q), kind="stable") if match[j]][:30] for q in queries[:8]]

    def top30() -> list[tuple[list[int], str]]:
        return _search(db, queries[:8], k=30, filter='{"g": 3}', max_scan_tuples=1)

    _set_audit(db, "0")
    short = top30()
    assert all(len(ids) < 30 for ids, _ in short), [len(ids) for ids, _ in short]
    _set_audit(db, str(N))  # every matching chunk sampled: one outside each short list
    # each short list fails; the list at ef_search 1000 is searched exactly where it stops short too, and where it
    # comes back full it passes only with its top 10 right (what the audit checks: ranks 11 to 30 are the index's)
    audited = top30()
    assert {a for _, a in audited} <= {"failed: widened to ef_search 1000", "failed: searched exactly"}
    assert "failed: searched exactly" in {a for _, a in audited}
    for (ids, a), e in zip(audited, exact):
        assert (ids == e) if a == "failed: searched exactly" else (len(ids) == 30 and ids[:10] == e[:10]), (a, ids, e)


def test_the_sample_is_the_partitions_first_live_chunks_in_hashtext_order(db: Db) -> None:
    # the audit fails a list exactly where one of the first dense_audit_rows live chunks by hashtext(chunk_id), a
    # sample of rows across the partition (not of blocks, whose neighbouring chunks share documents), beats its 10th
    vecs, queries = _fill(db)
    k = 300
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        sample = [int(r[0][1:]) for r in admin.execute(
            "SELECT chunk_id FROM hybrid.chunk WHERE tenant_id = 'acme' AND NOT superseded ORDER BY hashtext(chunk_id) LIMIT %s",
            (k,)).fetchall()]
    _set_audit(db, "0")
    plain = _search(db, queries)
    predicted, judged = [], []
    for q, (ids, _) in zip(queries, plain):
        d10 = 1.0 - float(vecs[ids[9]] @ q)
        d = 1.0 - vecs[[s for s in sample if s not in ids]] @ q
        if np.min(np.abs(d - d10)) > 1e-4:  # no sampled chunk within float rounding of the 10th: a clear verdict
            judged.append(len(predicted))
        predicted.append(bool(np.any(d < d10)))
    _set_audit(db, str(k))
    outcome = [a.startswith("failed") for _, a in _search(db, queries)]
    assert [outcome[i] for i in judged] == [predicted[i] for i in judged]
    assert 2 <= sum(predicted[i] for i in judged) < len(judged), (sum(predicted), len(judged))


def test_a_missing_sample_index_is_reported_and_comes_back_with_a_reapply(db: Db) -> None:
    vecs, queries = _fill(db)
    _set_audit(db, "1000")
    audited = _search(db, queries[:10])
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        admin.execute("DROP INDEX hybrid.chunk_audit_sample_idx")
        found = {f.subject: f for f in check(admin)}["index chunk_audit_sample_idx"]
    assert (found.state, found.problem, found.fix) == ("MISSING", True, "pyhybrid migrate --reapply")
    assert _search(db, queries[:10]) == audited  # the same sample, sorted from the partition meanwhile
    migrate.upgrade(db.dsn(), reapply=True)
    with psycopg.connect(db.dsn(), autocommit=True) as admin:
        found = {f.subject: f for f in check(admin)}["index chunk_audit_sample_idx"]
        parts = admin.execute("SELECT count(*) FROM pg_partition_tree('hybrid.chunk_audit_sample_idx')").fetchone()[0]
        tables = admin.execute("SELECT count(*) FROM pg_partition_tree('hybrid.chunk')").fetchone()[0]
    assert (found.state, found.problem) == ("present", False)
    assert parts == tables  # the parent's and one a partition
