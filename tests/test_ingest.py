"""Bulk ingestion: COPY + upsert, idempotent, atomic, with errors that name the row and the rule."""

from __future__ import annotations

import dataclasses

import math

import numpy as np
import psycopg
import pytest

from pyhybrid import Chunk, HybridClient, InvalidParameterError, TenantError
from tests.conftest import Api, Db
from tests.helpers import DIM, chunks, unit


def _rows(db: Db, tenant: str = "acme") -> list[tuple[str, bool]]:
    with psycopg.connect(db.dsn()) as c:
        return [(r[0], r[1]) for r in c.execute(
            "SELECT chunk_id, superseded FROM hybrid.chunk WHERE tenant_id = %s ORDER BY chunk_id", (tenant,))]


@pytest.mark.slow
def test_ingesting_the_same_10000_chunks_twice_leaves_10000_rows(api: Api, db: Db) -> None:
    batch = chunks("c", 10_000, doc_size=4)
    first = api.ingest("acme", batch)
    second = api.ingest("acme", batch)
    assert (first.inserted, first.updated) == (10_000, 0)
    assert (second.inserted, second.updated, second.unchanged) == (0, 0, 10_000)
    assert len(_rows(db)) == 10_000


def test_a_new_embedding_or_new_metadata_is_an_update_and_the_same_chunk_is_not(api: Api, db: Db) -> None:
    batch = chunks("c", 3)
    api.ingest("acme", batch)
    reembedded = [dataclasses.replace(batch[0], embedding=unit(999)), batch[1],
                  dataclasses.replace(batch[2], metadata={"i": 2, "lang": "fr"})]
    res = api.ingest("acme", reembedded)
    assert (res.inserted, res.updated, res.unchanged) == (0, 2, 1)
    with psycopg.connect(db.dsn()) as c:  # one definition of the hash, in SQL
        assert c.execute("SELECT count(*) FROM hybrid.chunk WHERE content_hash IS DISTINCT FROM hybrid.content_hash("
                         "document_id, position, content, acl_labels, metadata, corpus_id)").fetchone() == (0,)


@pytest.mark.parametrize("bad, rule", [
    ({"chunk_id": None}, "chunk_id is missing"),
    ({"chunk_id": "  "}, "chunk_id is missing"),
    ({"document_id": None}, "document_id is missing"),
    ({"embedding": [0.1] * (DIM - 1)}, f"embedding has {DIM - 1} dimensions, expected {DIM}"),
    ({"embedding": [math.nan] + [0.1] * (DIM - 1)}, "embedding contains NaN"),
    ({"embedding": [math.inf] + [0.1] * (DIM - 1)}, "embedding contains an infinite value"),
    ({"chunk_id": "c-1"}, "chunk_id appears more than once in the batch"),
])
def test_a_batch_with_one_bad_row_writes_nothing_and_names_the_row(api: Api, db: Db, bad: dict, rule: str) -> None:
    good = [c.__dict__.copy() for c in chunks("c", 5)]
    good[3].update(bad)
    with pytest.raises(InvalidParameterError, match="chunk row 4 .*" + rule.replace("(", r"\(")):
        api.ingest("acme", good)
    assert _rows(db) == []


def test_a_row_of_another_tenant_is_refused_and_nothing_written(api: Api, db: Db) -> None:
    batch = [c.__dict__.copy() for c in chunks("c", 3)]
    batch[1]["tenant_id"] = "globex"
    with pytest.raises(TenantError, match="chunk row 2"):
        api.ingest("acme", batch)
    assert _rows(db) == [] and _rows(db, "globex") == []


def test_sql_validation_names_the_row_when_python_is_bypassed(db: Db) -> None:
    with psycopg.connect(db.dsn("pyh_app")) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        c.execute("SELECT hybrid.begin_ingest()")
        c.execute("INSERT INTO pg_temp.hybrid_chunk_stage (chunk_id, document_id, content, embedding) "
                  "VALUES ('a', 'd', 'x', array_fill(0.5::real, ARRAY[384])), ('b', 'd', 'y', ARRAY[1,2]::real[])")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="chunk row 2 .*'b'.*2 dimensions, expected 384"):
            c.execute("SELECT * FROM hybrid.finish_ingest('default')")


def test_the_staging_table_is_kept_by_the_session_emptied_by_each_commit_and_usable_by_its_roles(db: Db) -> None:
    """One staging table a session (ON COMMIT DELETE ROWS): a batch after the first writes no catalog row (a table
    made and dropped by each batch did), numbers its rows from 1, stages nothing that outlives its transaction, and
    a role set later in the session (an authenticator switching roles) stages into the table an earlier one made."""
    stage = "SELECT c.oid, c.relfilenode, c.xmin::text FROM pg_class c WHERE c.oid = 'pg_temp.hybrid_chunk_stage'::regclass"
    seen = []
    with psycopg.connect(db.dsn()) as c:
        for i, role in enumerate(["pyh_app", "pyh_acme_writer", "pyh_app", "pyh_acme_writer"]):
            c.execute(f"SET LOCAL ROLE {role}")
            c.execute("SELECT set_config('hybrid.tenant_id', 'acme', true), hybrid.begin_ingest()")
            c.execute("INSERT INTO pg_temp.hybrid_chunk_stage (chunk_id, document_id, content) "
                      "VALUES (%s, 'd', 'x'), ('', 'd', 'y')", (f"s{i}",))
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="chunk row 2 "):
                c.execute("SELECT * FROM hybrid.finish_ingest('default')")
            c.rollback()
            c.execute(f"SET LOCAL ROLE {role}")
            c.execute("SELECT set_config('hybrid.tenant_id', 'acme', true), hybrid.begin_ingest()")
            c.execute("INSERT INTO pg_temp.hybrid_chunk_stage (chunk_id, document_id, content) VALUES (%s, 'd', 'x')",
                      (f"s{i}",))
            c.execute("SELECT * FROM hybrid.finish_ingest('default')")
            c.execute("INSERT INTO pg_temp.hybrid_chunk_stage (chunk_id, document_id, content) VALUES ('late', 'd', 'x')")
            c.commit()
            seen.append(c.execute(stage).fetchone())
            assert c.execute("SELECT count(*) FROM pg_temp.hybrid_chunk_stage").fetchone() == (0,)
            c.rollback()
    assert len(set(seen)) == 1, seen
    assert [r[0] for r in _rows(db)] == ["s0", "s1", "s2", "s3"]


def test_reingesting_a_document_supersedes_chunks_it_no_longer_has(api: Api, db: Db) -> None:
    api.ingest("acme", chunks("c", 6, doc_size=3))  # docs c-doc-0 (c-0..2), c-doc-1 (c-3..5)
    new_doc0 = [Chunk(chunk_id="c-0", document_id="c-doc-0", content="rewritten", embedding=unit(7))]
    result = api.ingest("acme", new_doc0)
    assert (result.updated, result.superseded) == (1, 2)
    assert _rows(db) == [("c-0", False), ("c-1", True), ("c-2", True), ("c-3", False), ("c-4", False), ("c-5", False)]
    hits = api.retrieve("acme", query_text="chunk number", top_k=10)
    assert {h.chunk_id for h in hits} == {"c-3", "c-4", "c-5"}


def test_chunks_without_embedding_are_found_lexically(api: Api) -> None:
    api.call("acme", "ingest", [Chunk(chunk_id="t", document_id="d", content="peristaltic occlusion sensor")],
             allow_missing_embeddings=True)
    hits = api.retrieve("acme", query_text="occlusion")
    assert [h.chunk_id for h in hits] == ["t"]


def test_numpy_embeddings_and_lists_are_accepted(api: Api) -> None:
    vec = unit(3)
    api.ingest("acme", [Chunk(chunk_id="n", document_id="d", content="x", embedding=vec),
                        Chunk(chunk_id="l", document_id="d", content="y", embedding=vec.tolist())])
    hits = api.retrieve("acme", query_embedding=np.asarray(vec), top_k=2)
    assert {h.chunk_id for h in hits} == {"n", "l"}


@pytest.mark.usefixtures("require_age")
def test_add_edges_is_idempotent_and_creates_entity_vertices(api: Api, db: Db) -> None:
    api.ingest("acme", chunks("c", 3))
    edges = [{"src": "c-0", "dst": "c-1", "rel": "VERIFIES"}, {"src": "c-2", "dst": "ent:pump", "rel": "MENTIONS"}]
    first = api.add_edges("acme", edges)
    second = api.add_edges("acme", edges)
    assert (first.edges_added, first.nodes_added) == (2, 4)
    assert (second.edges_added, second.edges_present, second.nodes_added) == (0, 2, 0)
    with psycopg.connect(db.dsn()) as c:
        kinds = dict(c.execute("SELECT node_id, kind FROM hybrid.graph_node").fetchall())
    assert kinds == {"c-0": "chunk", "c-1": "chunk", "c-2": "chunk", "ent:pump": "entity"}


@pytest.mark.usefixtures("require_age")
@pytest.mark.parametrize("edge, rule", [
    ({"src": "a", "dst": "b", "rel": "verifies"}, "rel must be UPPER_SNAKE_CASE"),
    ({"src": "a", "dst": "a", "rel": "X"}, "src and dst are the same node"),
    ({"src": "", "dst": "b", "rel": "X"}, "src is missing"),
])
def test_bad_edges_are_refused_with_the_row_and_rule(api: Api, edge: dict, rule: str) -> None:
    with pytest.raises(InvalidParameterError, match="edge row 2: " + rule):
        api.add_edges("acme", [{"src": "a", "dst": "b", "rel": "X"}, edge])


def test_delete_document_removes_its_chunks(db: Db) -> None:
    with HybridClient(db.dsn("pyh_app")) as c:
        with c.tenant("acme") as t:
            t.ingest(chunks("c", 4, doc_size=2))
        with c.tenant("acme") as t:
            assert t.delete_document("c-doc-0") == 2
    assert [r[0] for r in _rows(db)] == ["c-2", "c-3"]


@pytest.mark.parametrize("bad, message", [
    ({"metadata": {"note": "a\x00b"}}, r"chunk row 2 \(chunk_id 'c-1'\): metadata contains a NUL character"),
    ({"acl_labels": ["q\ud800"]}, r"chunk row 2 \(chunk_id 'c-1'\): acl_labels is not valid Unicode text"),
    ({"content": "x" * 1_000_001}, r"chunk row 2 \(chunk_id 'c-1'\): content is 1000001 bytes; at most 1000000"),
    ({"document_id": "d\ud800"}, r"chunk row 2 \(chunk_id 'c-1'\): document_id is not valid Unicode text"),
])
def test_text_postgresql_cannot_store_is_refused_naming_the_row_and_field(api: Api, db: Db, bad: dict,
                                                                          message: str) -> None:
    batch = [c.__dict__.copy() for c in chunks("c", 3)]
    batch[1].update(bad)
    with pytest.raises(InvalidParameterError, match=message):
        api.ingest("acme", batch)
    assert _rows(db) == []


def test_a_corpus_id_with_a_nul_is_refused_naming_it(api: Api) -> None:
    with pytest.raises(InvalidParameterError, match="corpus_id contains a NUL character"):
        api.ingest("acme", chunks("c", 1), corpus_id="qms\x00")


@pytest.mark.parametrize("edge, message", [
    ({"src": "a\x00", "dst": "b", "rel": "LINKS"}, r"edge row 2: src contains a NUL character"),
    ({"src": "a", "dst": "b\ud800", "rel": "LINKS"}, r"edge row 2: dst is not valid Unicode text"),
    ({"src": "a", "dst": "b", "rel": "LINKS", "properties": {"w": float("nan")}},
     r"edge row 2: properties are not valid JSON"),
    ({"src": "a", "dst": "b", "rel": "LINKS", "properties": {"w": "x\x00"}},
     r"edge row 2: properties contains a NUL character"),
])
def test_bad_edges_are_refused_naming_the_row_and_field(edge: dict, message: str) -> None:
    from pyhybrid._copy import prepare_edges

    with pytest.raises(InvalidParameterError, match=message):
        prepare_edges([{"src": "x", "dst": "y", "rel": "LINKS"}, edge])


@pytest.mark.usefixtures("require_age")
def test_two_concurrent_add_edges_meeting_the_same_new_node_both_succeed(api: Api, db: Db) -> None:
    import threading

    api.ingest("acme", chunks("c", 3))

    def load(conn: psycopg.Connection, src: str) -> None:
        conn.execute("SELECT set_config('hybrid.tenant_id', 'acme', true)")
        conn.execute("SELECT hybrid.begin_edges()")
        conn.execute("INSERT INTO pg_temp.hybrid_edge_stage (src, dst, rel) VALUES (%s, 'acme:entity:shared', "
                     "'MENTIONS')", (src,))
        conn.execute("SELECT * FROM hybrid.finish_edges()")

    errors: list[BaseException] = []
    with psycopg.connect(db.dsn("pyh_app")) as first, psycopg.connect(db.dsn("pyh_app")) as second:
        load(first, "c-0")  # not committed yet

        def other() -> None:
            try:
                load(second, "c-1")
                second.commit()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join(1.0)  # the second load waits for the first
        first.commit()
        t.join(30)
    assert errors == []
    with psycopg.connect(db.dsn()) as c:
        assert c.execute("SELECT count(*) FROM hybrid.graph_node WHERE node_id = 'acme:entity:shared'").fetchone() == (1,)
        assert c.execute("SELECT count(*) FROM hybrid_graph.rel_0").fetchone() == (2,)  # acme's MENTIONS
