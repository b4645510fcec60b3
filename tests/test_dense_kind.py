"""Changing what the HNSW index holds on a 384-d install: vector, halfvec copies or binary codes, online."""

from __future__ import annotations

import threading

import numpy as np
import psycopg
import pytest

from pyhybrid import Chunk, HybridClient, InvalidParameterError, PyhybridError
from pyhybrid.cli import main
from pyhybrid.doctor import check
from pyhybrid.maintenance import set_dense_index_kind
from tests.conftest import Db

DIM = 384
N = 400
OPCLASS = {"vector": "vector_cosine_ops", "halfvec": "halfvec_cosine_ops", "bit": "bit_hamming_ops"}
KINDS_SQL = """SELECT c.relname, o.opcname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
JOIN pg_opclass o ON o.oid = x.indclass[0] JOIN pg_am a ON a.oid = c.relam
WHERE a.amname = 'hnsw' AND c.relnamespace = 'hybrid'::regnamespace AND o.opcname <> 'sparsevec_ip_ops'  -- the dense ones
ORDER BY c.relname"""


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _fill(db: Db) -> tuple[np.ndarray, np.ndarray]:
    """acme: N clustered unit vectors; globex: 5. Returns acme's vectors and 10 queries near them."""
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((12, DIM))
    vecs = np.stack([_unit(centres[i % 12] + 1.1 * rng.standard_normal(DIM)) for i in range(N)])
    queries = np.stack([_unit(centres[q % 12] + 1.1 * rng.standard_normal(DIM)) for q in range(10)])
    with HybridClient(db.dsn("pyh_app")) as c:
        with c.tenant("acme") as t:
            t.ingest([Chunk(chunk_id=f"c{i}", document_id=f"d{i}", content=f"chunk {i} about pumps", embedding=vecs[i])
                      for i in range(N)])
        with c.tenant("globex") as t:
            t.ingest([Chunk(chunk_id=f"g{i}", document_id=f"g{i}", content="globex", embedding=vecs[i]) for i in range(5)])
    with psycopg.connect(db.dsn(), autocommit=True) as c:
        c.execute("VACUUM ANALYZE hybrid.chunk")
    return vecs, queries


def _hnsw_top(db: Db, q: np.ndarray, k: int = 10) -> list[str]:
    """search_dense through the HNSW index (exact_threshold 0), as acme's reader."""
    with psycopg.connect(db.dsn("pyh_acme")) as c:
        return [r[0] for r in c.execute("SELECT chunk_id FROM hybrid.search_dense(%s::vector, %s, exact_threshold => 0) "
                                        "ORDER BY rank", (q.tolist(), k)).fetchall()]


def _kinds(db: Db) -> dict[str, str]:
    with psycopg.connect(db.dsn()) as c:
        return dict(c.execute(KINDS_SQL).fetchall())


@pytest.mark.parametrize("kind", ["halfvec", "bit"])
def test_a_kind_change_rebuilds_every_partition_online_and_search_follows(db: Db, kind: str) -> None:
    vecs, queries = _fill(db)
    exact = [set(np.argsort(-(vecs @ q))[:10]) for q in queries]
    before = [_hnsw_top(db, q) for q in queries]
    lines: list[str] = []
    assert set_dense_index_kind(db.dsn(), kind, report=lines.append).startswith(f"{kind} (0 partition indexes built here")
    assert sum(line.startswith(f"built {kind} HNSW index") for line in lines) >= 2  # acme's and globex's, CONCURRENTLY
    kinds = _kinds(db)
    assert kinds and set(kinds.values()) == {OPCLASS[kind]}, kinds  # the parent and every partition, nothing left over
    assert not any(name.endswith(f"_embedding_{kind}") for name in kinds)
    after = [_hnsw_top(db, q) for q in queries]
    recall = np.mean([len(exact[i] & {int(x[1:]) for x in after[i]}) / 10 for i in range(len(queries))])
    assert recall >= 0.9 and all(len(a) == 10 for a in after), (recall, after)
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(after, before)]) >= 0.9
    # what the index holds is what doctor and explain_retrieve name
    with psycopg.connect(db.dsn()) as c:
        found = {f.subject: f for f in check(c)}
    assert found["dense index kind"].state.startswith(f"{kind} (") and not found["dense index kind"].problem
    with psycopg.connect(db.dsn(), autocommit=True) as c:
        # acme's 400: HNSW (the exact threshold is the larger of exact_threshold and the audit's sample)
        c.execute("INSERT INTO hybrid.setting (key, value) VALUES ('exact_threshold', '100'), ('dense_audit_rows', '100')")
    with HybridClient(db.dsn("pyh_acme")) as c, c.tenant("acme") as t:
        plan = t.explain_retrieve(query_embedding=queries[0])
    shown = "halfvec copies" if kind == "halfvec" else "binary codes"
    assert shown in str(plan), plan
    # a tenant created afterwards, an upgrade's re-apply and a bulk load's suspend/resume keep the kind
    with psycopg.connect(db.dsn(), autocommit=True) as c:
        c.execute("SELECT hybrid.create_tenant('initech', NULL, 'dedicated')")
    assert main(["--dsn", db.dsn(), "migrate", "--reapply"]) == 0
    with HybridClient(db.dsn()) as admin, admin.bulk_load():
        pass
    assert set(_kinds(db).values()) == {OPCLASS[kind]} and len(_kinds(db)) == len(kinds) + 1
    assert _hnsw_top(db, queries[0]) == after[0]
    # and auto goes back to the dimension's kind
    assert set_dense_index_kind(db.dsn(), "auto").startswith("vector (")
    assert set(_kinds(db).values()) == {"vector_cosine_ops"}
    with psycopg.connect(db.dsn()) as c:
        assert c.execute("SELECT count(*) FROM hybrid.setting WHERE key = 'dense_index_kind'").fetchone() == (0,)


def test_the_sql_call_alone_builds_the_partitions_itself_and_a_second_call_does_nothing(db: Db) -> None:
    _, queries = _fill(db)
    with psycopg.connect(db.dsn(), autocommit=True) as c:
        got = c.execute("SELECT hybrid.set_dense_index_kind('halfvec')").fetchone()[0]
        assert got.startswith("halfvec (") and "0 built beforehand" in got
        assert c.execute("SELECT hybrid.set_dense_index_kind('halfvec')").fetchone() == ("halfvec (the index holds it already)",)
        c.execute("SELECT hybrid.suspend_vector_index()")
        assert c.execute("SELECT hybrid.set_dense_index_kind('bit')").fetchone()[0].startswith("bit (the index is suspended")
        c.execute("SELECT hybrid.resume_vector_index()")
    assert set(_kinds(db).values()) == {"bit_hamming_ops"}
    assert len(_hnsw_top(db, queries[1])) == 10


def test_reads_and_writes_go_on_while_the_new_kind_builds(db: Db) -> None:
    _, queries = _fill(db)
    errors: list[BaseException] = []
    stop = threading.Event()

    def traffic() -> None:
        i = 0
        try:
            with HybridClient(db.dsn("pyh_app")) as c:
                while not stop.is_set():
                    with c.tenant("acme") as t:
                        assert len(t.retrieve(query_embedding=queries[i % 10], top_k=5)) == 5
                        t.ingest([Chunk(chunk_id=f"w{i}", document_id=f"w{i}", content="written meanwhile",
                                        embedding=queries[i % 10])])
                    i += 1
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    worker = threading.Thread(target=traffic)
    worker.start()
    try:
        set_dense_index_kind(db.dsn(), "halfvec")
    finally:
        stop.set()
        worker.join(60)
    assert not errors, errors
    with psycopg.connect(db.dsn()) as c:
        written = c.execute("SELECT count(*) FROM hybrid.chunk WHERE chunk_id LIKE 'w%'").fetchone()[0]
    assert written > 0
    assert "w0" in _hnsw_top(db, queries[0], 30)  # a chunk written during the build is in the new index


def test_bad_kinds_are_refused_naming_the_rule_and_change_nothing(db: Db, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(db)
    before = _kinds(db)
    with pytest.raises(InvalidParameterError, match="kind must be one of auto, vector, halfvec, bit, got 'ivfflat'"):
        set_dense_index_kind(db.dsn(), "ivfflat")
    with psycopg.connect(db.dsn(), autocommit=True) as c:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="kind must be vector, halfvec or bit, got 'ivfflat'"):
            c.execute("SELECT hybrid.set_dense_index_kind('ivfflat')")
        # the setting is the engine's record of what the index holds: a hand-written bad value is named
        c.execute("INSERT INTO hybrid.setting (key, value) VALUES ('dense_index_kind', 'ivfflat')")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="setting dense_index_kind must be vector"):
            c.execute("SELECT hybrid._dense_kind(384)")
        c.execute("DELETE FROM hybrid.setting WHERE key = 'dense_index_kind'")
        # vector holds HNSW up to 2,000 dimensions, halfvec up to 4,000 (a wide install: tests/test_dims.py)
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="kind vector: pgvector builds HNSW on vector up to 2000"):
            c.execute("SELECT hybrid._valid_dense_kind('vector', 3072)")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="kind halfvec: .* up to 4000 dimensions"):
            c.execute("SELECT hybrid._valid_dense_kind('halfvec', 4096)")
        assert c.execute("SELECT hybrid._valid_dense_kind('bit', 4096)").fetchone() == ("bit",)
    assert _kinds(db) == before
    with pytest.raises(SystemExit) as exit_:
        main(["--dsn", db.dsn(), "doctor", "--dense-kind", "ivfflat"])
    assert exit_.value.code == 2
    assert "invalid choice: 'ivfflat'" in capsys.readouterr().err


def test_a_tenant_role_cannot_change_the_kind(db: Db) -> None:
    for role in ("pyh_app", "pyh_acme", "pyh_acme_writer"):
        with psycopg.connect(db.dsn(role), autocommit=True) as c:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute("SELECT hybrid.set_dense_index_kind('bit')")
        with pytest.raises(PyhybridError):
            set_dense_index_kind(db.dsn(role), "bit")
    assert set(_kinds(db).values()) == {"vector_cosine_ops"}
