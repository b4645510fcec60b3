"""The dense branch's audit: an HNSW list that a sample of the partition proves wrong is searched again at pgvector's
widest breadth, and replaced by an exact search where that list is wrong too."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import psycopg
import pytest

from pyhybrid import Chunk, HybridClient, migrate
from pyhybrid.doctor import check
from tests.conftest import Db, fresh_db

DIM = 384
N = 3000


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _data() -> tuple[np.ndarray, np.ndarray]:
    """N vectors in 150 tight topic clusters of 5 to 35 chunks, and 40 queries near the clusters' centres."""
    rng = np.random.default_rng(11)
    centres = rng.standard_normal((150, DIM))
    sizes = rng.integers(5, 36, size=150)
    cluster = np.repeat(np.arange(150), sizes)[:N]
    cluster = np.concatenate([cluster, rng.integers(0, 150, size=N - len(cluster))])
    vecs = np.stack([_unit(centres[c] + 0.35 * rng.standard_normal(DIM)) for c in cluster])
    queries = np.stack([_unit(centres[c] + 0.35 * rng.standard_normal(DIM)) for c in rng.integers(0, 150, size=40)])
    return vecs, queries


@pytest.fixture(scope="module")
def filled_template(admin_dsn: str, template_db: str) -> Iterator[str]:
    """acme holding _data()'s vectors, indexed by a deliberately poor HNSW graph (m 8, ef_construction 16) searched at
    ef_search 20: the beam often misses a query's cluster. Loaded once; each test clones it (filled)."""
    vecs, _ = _data()
    with fresh_db(admin_dsn, template_db) as db:
        with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
            t.ingest([Chunk(chunk_id=f"c{i}", document_id=f"d{i // 4}", position=i % 4, content=f"chunk {i}",
                            embedding=vecs[i], metadata={"g": i % 50}) for i in range(N)])
        with psycopg.connect(db.dsn(), autocommit=True) as admin:
            admin.execute("VACUUM ANALYZE hybrid.chunk")
            admin.execute("INSERT INTO hybrid.setting (key, value) VALUES ('hnsw_m', '8'), "
                          "('hnsw_ef_construction', '16'), ('hnsw_ef_search', '20')")
            admin.execute("SELECT hybrid.suspend_vector_index()")
            admin.execute("SELECT hybrid.resume_vector_index()")
        yield db.name


@pytest.fixture()
def filled(admin_dsn: str, filled_template: str) -> Iterator[Db]:
    """A clone of filled_template: acme holds the N chunks of _data()."""
    with fresh_db(admin_dsn, filled_template) as db:
        yield db


def _builds(db: Db, n: int = 3) -> Iterator[int]:
    """acme's HNSW graph, built up to n times: pgvector draws each element's level at random, so what one build
    misses another may not. A test asserts its properties on every build it reads and leaves the loop once a
    build exercised every case it needs (and fails when none of the n did)."""
    for b in range(n):
        if b:
            with psycopg.connect(db.dsn(), autocommit=True) as admin:
                admin.execute("SELECT hybrid.suspend_vector_index()")
                admin.execute("SELECT hybrid.resume_vector_index()")
        yield b


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


def test_an_hnsw_list_that_misses_nearer_chunks_is_replaced_by_the_exact_top_k(filled: Db) -> None:
    vecs, queries = _data()
    exact = [list(np.argsort(-(vecs @ q), kind="stable")[:10]) for q in queries]
    for _ in _builds(filled):
        _set_audit(filled, "0")  # no audit: the poor graph's own lists
        plain = _search(filled, queries)
        assert {a for _, a in plain} == {"off"}
        missed = [i for i, (ids, _) in enumerate(plain) if set(ids) != set(exact[i])]
        _set_audit(filled, str(N))  # the whole partition sampled: every miss inside the top 10 is seen
        audited = _search(filled, queries)
        assert [set(ids) for ids, _ in audited] == [set(e) for e in exact]
        assert [i for i, (_, a) in enumerate(audited) if a.startswith("failed")] == missed
        assert {a for i, (_, a) in enumerate(audited) if i not in missed} <= {"passed"}
        # each miss is repaired by the wider list (ef_search 1000 on this graph of 3,000 chunks) or, where that list
        # fails the audit too, by the exact scan; the counts printed, the outcomes asserted
        repaired = [a for i, (_, a) in enumerate(audited) if i in missed]
        print({a: repaired.count(a) for a in set(repaired)})
        assert set(repaired) <= {"failed: widened to ef_search 1000", "failed: searched exactly"}
        _set_audit(filled, str(N - 1))
        outcome = [a for _, a in _search(filled, queries, None)]
        # this build proves something once the graph missed (5 lists at least), a wider list repaired one, and one
        # of N - 1 sampled rows both widened and passed
        if len(missed) >= 5 and "failed: widened to ef_search 1000" in repaired \
                and {"failed: widened to ef_search 1000", "passed"} <= set(outcome):
            break
    else:
        pytest.fail("no build of three missed five lists, repaired one by the wider list and passed one")
    _set_audit(filled, None)  # the default, 1,000 sampled rows of 3,000: never worse than no audit
    default = _search(filled, queries)
    assert all(len(set(d) & set(e)) >= len(set(p) & set(e)) for (d, _), (p, _), e in zip(default, plain, exact))
    assert sum(set(d) == set(e) for (d, _), e in zip(default, exact)) > len(queries) - len(missed)
    # without the argument, a partition within the sample is searched exactly: the audit would read it all
    _set_audit(filled, str(N))
    assert [set(ids) for ids, _ in _search(filled, queries, None)] == [set(e) for e in exact]
    # explain_retrieve names the audit's outcome beside the HNSW breadth (per_source_k 10: the same list)
    _set_audit(filled, str(N - 1))
    with HybridClient(filled.dsn("pyh_app")) as c, c.tenant("acme") as t:
        shown = [str(t.explain_retrieve(query_embedding=queries[outcome.index(a)], per_source_k=10))
                 for a in ("failed: widened to ef_search 1000", "passed")]
    assert "ef_search 20, audit failed: widened to ef_search 1000" in shown[0], shown[0]
    assert "ef_search 20, audit passed" in shown[1], shown[1]
    with HybridClient(filled.dsn("pyh_app")) as c, c.tenant("acme") as t:  # and a partition within the sample
        _set_audit(filled, str(N))
        assert [b["plan"] for b in t.explain_retrieve(query_embedding=queries[0])["branches"]] == ["exact scan"]


def test_a_malformed_audit_setting_is_refused_by_name(filled: Db) -> None:
    _, queries = _data()
    _set_audit(filled, "some")
    with psycopg.connect(filled.dsn("pyh_acme")) as c:
        with pytest.raises(psycopg.errors.InvalidParameterValue,
                           match="setting dense_audit_rows must be a non-negative integer, got 'some'"):
            c.execute("SELECT * FROM hybrid.search_dense(%s::vector, 10)", (queries[0].tolist(),))


def test_a_list_shorter_than_top_k_is_audited_against_any_visible_chunk_outside_it(filled: Db) -> None:
    # a selective filter on an HNSW scan that may stop early (hnsw.max_scan_tuples, 20,000 by default: here 1, so
    # the scan ends with the candidates its first search visited) comes back short; one chunk in fifty matches
    # 24 queries: each widened list comes back full now and then (the graph's levels are random at every build);
    # with 8, a build where all eight did failed the last check below once
    vecs, queries = _data()
    match = np.arange(N) % 50 == 3
    exact = [[int(j) for j in np.argsort(-(vecs @ q), kind="stable") if match[j]][:30] for q in queries[:24]]

    def top30() -> list[tuple[list[int], str]]:
        return _search(filled, queries[:24], k=30, filter='{"g": 3}', max_scan_tuples=1)

    for _ in _builds(filled):
        _set_audit(filled, "0")
        short = top30()
        assert all(len(ids) < 30 for ids, _ in short), [len(ids) for ids, _ in short]
        _set_audit(filled, str(N))  # every matching chunk sampled: one outside each short list
        # each short list fails; the list at ef_search 1000 is searched exactly where it stops short too, and where
        # it comes back full it passes only with its top 10 right (what the audit checks: ranks 11 to 30 are the index's)
        audited = top30()
        assert {a for _, a in audited} <= {"failed: widened to ef_search 1000", "failed: searched exactly"}
        for (ids, a), e in zip(audited, exact):
            assert (ids == e) if a == "failed: searched exactly" else (len(ids) == 30 and ids[:10] == e[:10]), (a, ids, e)
        if "failed: searched exactly" in {a for _, a in audited}:
            break
    else:
        pytest.fail("no build of three left a widened list short, which the exact scan then replaces")


def test_the_sample_is_the_partitions_first_live_chunks_in_hashtext_order(filled: Db) -> None:
    # the audit fails a list exactly where one of the first dense_audit_rows live chunks by hashtext(chunk_id), a
    # sample of rows across the partition (not of blocks, whose neighbouring chunks share documents), beats its 10th
    vecs, queries = _data()
    k = 300
    with psycopg.connect(filled.dsn(), autocommit=True) as admin:
        sample = [int(r[0][1:]) for r in admin.execute(
            "SELECT chunk_id FROM hybrid.chunk WHERE tenant_id = 'acme' AND NOT superseded ORDER BY hashtext(chunk_id) LIMIT %s",
            (k,)).fetchall()]
    _set_audit(filled, "0")
    plain = _search(filled, queries)
    predicted, judged = [], []
    for q, (ids, _) in zip(queries, plain):
        d10 = 1.0 - float(vecs[ids[9]] @ q)
        d = 1.0 - vecs[[s for s in sample if s not in ids]] @ q
        if np.min(np.abs(d - d10)) > 1e-4:  # no sampled chunk within float rounding of the 10th: a clear verdict
            judged.append(len(predicted))
        predicted.append(bool(np.any(d < d10)))
    _set_audit(filled, str(k))
    outcome = [a.startswith("failed") for _, a in _search(filled, queries)]
    assert [outcome[i] for i in judged] == [predicted[i] for i in judged]
    assert 2 <= sum(predicted[i] for i in judged) < len(judged), (sum(predicted), len(judged))


def test_a_missing_sample_index_is_reported_and_comes_back_with_a_reapply(filled: Db) -> None:
    _, queries = _data()
    _set_audit(filled, "1000")
    audited = _search(filled, queries[:10])
    with psycopg.connect(filled.dsn(), autocommit=True) as admin:
        admin.execute("DROP INDEX hybrid.chunk_audit_sample_idx")
        found = {f.subject: f for f in check(admin)}["index chunk_audit_sample_idx"]
    assert (found.state, found.problem, found.fix) == ("MISSING", True, "pyhybrid migrate --reapply")
    assert _search(filled, queries[:10]) == audited  # the same sample, sorted from the partition meanwhile
    migrate.upgrade(filled.dsn(), reapply=True)
    with psycopg.connect(filled.dsn(), autocommit=True) as admin:
        found = {f.subject: f for f in check(admin)}["index chunk_audit_sample_idx"]
        parts = admin.execute("SELECT count(*) FROM pg_partition_tree('hybrid.chunk_audit_sample_idx')").fetchone()[0]
        tables = admin.execute("SELECT count(*) FROM pg_partition_tree('hybrid.chunk')").fetchone()[0]
    assert (found.state, found.problem) == ("present", False)
    assert parts == tables  # the parent's and one a partition


def _outcomes(db: Db, queries: np.ndarray, role: str = "pyh_acme") -> list[tuple[list[str], str, str]]:
    """search_dense's top 10 of each query, the audit's outcome and where it read its sample (cached or partition)."""
    out = []
    with psycopg.connect(db.dsn(role)) as c:
        for q in queries:
            with c.transaction():
                if role == "pyh_app":
                    c.execute("SELECT set_config('hybrid.tenant_id', 'acme', true)")
                ids = [r[0] for r in c.execute("SELECT chunk_id FROM hybrid.search_dense(%s::vector, 10, exact_threshold => 0) "
                                               "ORDER BY rank", (q.tolist(),)).fetchall()]
                row = c.execute("SELECT current_setting('hybrid.dense_audit', true), "
                                "current_setting('hybrid.dense_audit_sample', true)").fetchone()
                assert row is not None
                out.append((ids, row[0], row[1]))
    return out


def _cached(admin: psycopg.Connection) -> tuple[int, list[str]] | None:
    """acme's cached sample: (sample_rows, ids in order), or None where none is current."""
    state = admin.execute("SELECT s.sample_rows FROM hybrid.chunk_audit_sample_state s JOIN hybrid.tenant t USING (tenant_key) "
                          "WHERE t.tenant_id = 'acme'").fetchone()
    if state is None:
        return None
    return state[0], [r[0] for r in admin.execute(
        "SELECT s.chunk_id FROM hybrid.chunk_audit_sample s JOIN hybrid.tenant t USING (tenant_key) "
        "WHERE t.tenant_id = 'acme' ORDER BY s.ord").fetchall()]


def test_the_cached_sample_is_the_partitions_and_gives_the_same_verdicts(filled: Db) -> None:
    # the bulk path's resume_vector_index caches the sample: the same rows the audit reads from the partition,
    # and the same lists and outcomes as reading them there
    _, queries = _data()
    for _ in _builds(filled):  # the build's resume_vector_index caches the sample
        with psycopg.connect(filled.dsn(), autocommit=True) as admin:
            cached = _cached(admin)
            live = [r[0] for r in admin.execute(
                "SELECT chunk_id FROM hybrid.chunk WHERE tenant_id = 'acme' AND NOT superseded "
                "ORDER BY hashtext(chunk_id), chunk_id LIMIT 1000").fetchall()]
        assert cached == (1000, live)
        from_cache = _outcomes(filled, queries)
        assert {s for _, _, s in from_cache} == {"cached"}
        verdicts = {a for _, a, _ in from_cache}
        if "passed" in verdicts and any(a.startswith("failed") for a in verdicts):
            break
    else:
        pytest.fail("no build of three gave both verdicts")
    with psycopg.connect(filled.dsn(), autocommit=True) as admin:
        admin.execute("DELETE FROM hybrid.chunk_audit_sample_state")
    from_partition = _outcomes(filled, queries)
    assert {s for _, _, s in from_partition} == {"partition"}
    assert [(ids, a) for ids, a, _ in from_cache] == [(ids, a) for ids, a, _ in from_partition]
    # another dense_audit_rows than the cache was made with: the partition's sample of that size
    _set_audit(filled, "999")
    with psycopg.connect(filled.dsn(), autocommit=True) as admin:
        assert [r.sampled for r in admin.cursor(row_factory=psycopg.rows.namedtuple_row).execute(
            "SELECT * FROM hybrid.refresh_audit_samples('acme')")] == [999]
    _set_audit(filled, "1000")
    assert {s for _, _, s in _outcomes(filled, queries[:3])} == {"partition"}
    _set_audit(filled, "999")
    assert {s for _, _, s in _outcomes(filled, queries[:3])} == {"cached"}


def test_a_write_to_the_tenants_chunks_forgets_its_cached_sample(filled: Db) -> None:
    _, queries = _data()
    admin = psycopg.connect(filled.dsn(), autocommit=True)
    refresh = "SELECT * FROM hybrid.refresh_audit_samples('acme')"
    assert _cached(admin) is not None
    with HybridClient(filled.dsn("pyh_app")) as c, c.tenant("acme") as t:  # an ingest
        t.ingest([Chunk(chunk_id="new-0", document_id="new", content="new chunk", embedding=queries[0])])
    assert _cached(admin) is None
    assert {s for _, _, s in _outcomes(filled, queries[:2])} == {"partition"}
    admin.execute(refresh)
    sample = _cached(admin)
    assert sample is not None and sample[0] == 1000
    with HybridClient(filled.dsn("pyh_app")) as c, c.tenant("acme") as t:  # a delete
        assert t.delete_document("new") == 1
    assert _cached(admin) is None
    admin.execute(refresh)
    with HybridClient(filled.dsn("pyh_app")) as c, c.tenant("acme") as t:  # a prune (supersedes)
        assert t.prune_documents("default", keep=[f"d{i}" for i in range(1, N // 4)])
    assert _cached(admin) is None
    # merge_bm25 caches it again, and a tenant's removal takes its cache along
    admin.execute("SELECT * FROM hybrid.merge_bm25('acme')")
    assert _cached(admin) is not None
    admin.execute("SELECT * FROM hybrid.drop_tenant('acme')")
    assert admin.execute("SELECT (SELECT count(*) FROM hybrid.chunk_audit_sample), "
                         "(SELECT count(*) FROM hybrid.chunk_audit_sample_state)").fetchone() == (0, 0)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="tenant_id 'acme' does not exist"):
        admin.execute(refresh)
    admin.close()


def test_a_cached_row_the_caller_cannot_see_proves_no_list_wrong(filled: Db) -> None:
    # a sampled chunk behind an ACL label the reader lacks, nearest of all to the query (its own vector): the
    # reader's list cannot hold it, and it proves that list wrong neither from the cache nor from the partition
    vecs, queries = _data()
    admin = psycopg.connect(filled.dsn(), autocommit=True)
    # pgvector's own graph searched at its widest: on 3,000 chunks the lists are right but for the hidden chunk
    admin.execute("DELETE FROM hybrid.setting WHERE key IN ('hnsw_m', 'hnsw_ef_construction')")
    admin.execute("UPDATE hybrid.setting SET value = '1000' WHERE key = 'hnsw_ef_search'")
    admin.execute("SELECT hybrid.suspend_vector_index()")
    admin.execute("SELECT hybrid.resume_vector_index()")
    sample = _cached(admin)
    assert sample is not None
    hidden = int(sample[1][0][1:])
    doc = hidden // 4
    with HybridClient(filled.dsn("pyh_app")) as c, c.tenant("acme") as t:  # the document again, one chunk labelled
        t.ingest([Chunk(chunk_id=f"c{i}", document_id=f"d{doc}", position=i % 4, content=f"chunk {i}", embedding=vecs[i],
                        metadata={"g": i % 50}, acl_labels=["hidden"] if i == hidden else [])
                  for i in range(doc * 4, doc * 4 + 4)])
    admin.execute("SELECT * FROM hybrid.refresh_audit_samples('acme')")
    assert f"c{hidden}" in (_cached(admin) or (0, []))[1]
    q = vecs[hidden][None, :]
    (ids, audit, where), = _outcomes(filled, q)
    assert (f"c{hidden}" in ids, audit, where) == (False, "passed", "cached")
    admin.execute("DELETE FROM hybrid.chunk_audit_sample_state")
    assert _outcomes(filled, q) == [(ids, "passed", "partition")]
    admin.execute("SELECT * FROM hybrid.refresh_audit_samples('acme')")
    # a caller who sees it gets it first, and the audit passes as well
    with psycopg.connect(filled.dsn("pyh_app")) as c, c.transaction():
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', true), set_config('hybrid.acl_labels', '*', true)")
        first = c.execute("SELECT chunk_id FROM hybrid.search_dense(%s::vector, 10, exact_threshold => 0) ORDER BY rank",
                          (q[0].tolist(),)).fetchone()
        assert first == (f"c{hidden}",)
        assert c.execute("SELECT current_setting('hybrid.dense_audit_sample')").fetchone() == ("cached",)
    admin.close()


@pytest.mark.parametrize("role", ["pyh_acme", "pyh_acme_writer", "pyh_app"])
def test_no_tenant_or_app_role_reads_the_cached_sample_or_refreshes_it(filled: Db, role: str) -> None:
    with psycopg.connect(filled.dsn(role), autocommit=True) as c:
        for stmt in ("SELECT count(*) FROM hybrid.chunk_audit_sample", "SELECT * FROM hybrid.chunk_audit_sample_state",
                     "SELECT * FROM hybrid.refresh_audit_samples()", "SELECT hybrid._audit_sample_written(1)",
                     "DELETE FROM hybrid.chunk_audit_sample_state",
                     "SELECT hybrid._audit_sample_rows('hybrid.chunk'::regclass, 1000)"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(stmt)


def test_doctor_reports_the_partitions_whose_audit_sample_is_cached(filled: Db) -> None:
    _, queries = _data()
    with psycopg.connect(filled.dsn(), autocommit=True) as admin:
        found = {f.subject: f for f in check(admin)}["dense audit samples"]
        assert (found.state, found.problem, found.fix) == ("cached for 1 of 1 partitions searched through HNSW", False, None)
        with HybridClient(filled.dsn("pyh_app")) as c, c.tenant("acme") as t:
            t.ingest([Chunk(chunk_id="new-0", document_id="new", content="new chunk", embedding=queries[0])])
        found = {f.subject: f for f in check(admin)}["dense audit samples"]
        assert found.state.startswith("cached for 0 of 1 partitions") and not found.problem
        assert found.fix == "SELECT * FROM hybrid.refresh_audit_samples();"
        admin.execute(found.fix)
        assert {f.subject: f for f in check(admin)}["dense audit samples"].fix is None
