"""TenantSession.ingest(chunks, embedder=...): unchanged documents skipped, the rest embedded; no silent
chunks without embeddings."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Sequence

import numpy as np
import psycopg
import pytest

from pyhybrid import AsyncHybridClient, Chunk, HybridClient
from pyhybrid.chunking import scan_source
from tests.conftest import Api, Db
from tests.helpers import DIM, unit


class CountingEmbedder:
    """A deterministic embedder that records what it was asked to embed."""

    dim = DIM

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.stack([unit(sum(map(ord, t)) % 10_000) for t in texts])

    @property
    def embedded(self) -> int:
        return sum(len(c) for c in self.calls)


def _docs(n: int = 3) -> list[dict]:
    return [{"chunk_id": f"manual.md#{i}", "document_id": "manual.md", "position": i,
             "content": f"The occlusion alarm sounds within {10 * (i + 1)} seconds."} for i in range(n)] + [
            {"chunk_id": "notes.md#0", "document_id": "notes.md", "content": "The battery lasts six hours."}]


def _embedded(db: Db) -> dict[str, bool]:
    with psycopg.connect(db.dsn()) as c:
        return {r[0]: r[1] for r in c.execute("SELECT chunk_id, embedding IS NOT NULL FROM hybrid.chunk "
                                              "WHERE tenant_id = 'acme' AND NOT superseded")}


def test_ingest_with_an_embedder_embeds_what_lacks_a_vector_and_skips_unchanged_documents(api: Api, db: Db) -> None:
    embedder = CountingEmbedder()
    chunks = _docs()
    first = api.call("acme", "ingest", chunks, embedder=embedder)
    assert (first.inserted, first.unchanged, embedder.embedded) == (4, 0, 4)
    assert _embedded(db) == {"manual.md#0": True, "manual.md#1": True, "manual.md#2": True, "notes.md#0": True}
    assert all("embedding" not in c for c in chunks), "the caller's chunks are not changed"
    again = api.call("acme", "ingest", chunks, embedder=embedder)
    assert (again.inserted, again.updated, again.unchanged, embedder.embedded) == (0, 0, 4, 4)
    chunks[3] = {**chunks[3], "content": "The battery lasts eight hours."}
    changed = api.call("acme", "ingest", chunks, embedder=embedder)
    assert (changed.updated, changed.unchanged) == (1, 3)
    assert embedder.calls[-1] == ["The battery lasts eight hours."], "only the changed document is embedded"


def test_a_chunk_that_brings_its_embedding_keeps_it(api: Api, db: Db) -> None:
    embedder = CountingEmbedder()
    own = Chunk("own#0", "own", "Pre-embedded text.", embedding=unit(7))
    res = api.call("acme", "ingest", [own, _docs(1)[0]], embedder=embedder)
    assert res.inserted == 2 and embedder.calls == [["The occlusion alarm sounds within 10 seconds."]]
    with psycopg.connect(db.dsn()) as c:
        stored = c.execute("SELECT embedding::text FROM hybrid.chunk WHERE chunk_id = 'own#0'").fetchone()
    assert stored is not None and np.allclose(np.array(eval(stored[0])), unit(7), atol=1e-6)


def test_chunks_without_embeddings_and_without_an_embedder_are_deprecated(api: Api, db: Db) -> None:
    with pytest.warns(DeprecationWarning, match=r"ingest: 4 chunk\(s\) have no embedding \(the first: chunk_id "
                                                r"'manual.md#0'\).*is deprecated and will be refused in the next "
                                                r"release: pass embedder=.*allow_missing_embeddings=True"):
        res = api.call("acme", "ingest", _docs())
    assert res.inserted == 4 and set(_embedded(db).values()) == {False}


def test_lexical_only_chunks_are_stored_without_a_warning_when_asked_for(api: Api, db: Db) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = api.call("acme", "ingest", _docs(), allow_missing_embeddings=True)
    assert res.inserted == 4 and set(_embedded(db).values()) == {False}


def test_the_clients_embedder_serves_its_sessions_sync_and_async(db: Db) -> None:
    import asyncio

    sync_e, async_e = CountingEmbedder(), CountingEmbedder()
    with HybridClient(db.dsn("pyh_app"), embedder=sync_e) as client, client.tenant("acme") as t:
        assert t.ingest(_docs()).inserted == 4

    async def go() -> int:
        async with AsyncHybridClient(db.dsn("pyh_app"), embedder=async_e) as client:
            async with client.tenant("globex") as t:
                return (await t.ingest(_docs())).inserted

    assert asyncio.run(go()) == 4
    assert sync_e.embedded == async_e.embedded == 4


def test_a_folder_chunked_and_ingested_twice_embeds_nothing_the_second_time(db: Db, tmp_path: Path) -> None:
    (tmp_path / "guide.rst").write_text("Tenancy\n=======\n\n.. currentmodule:: pyhybrid\n\nEvery row carries "
                                        "tenant_id.\n\nRoles\n-----\n\nA tenant login role is bound to its tenants.\n")
    (tmp_path / "README.md").write_text("# pyhybrid\n\nHybrid retrieval inside PostgreSQL.\n\n```sh\n# install\n"
                                        "pip install pyhybrid\n```\n")
    embedder = CountingEmbedder()
    with HybridClient(db.dsn("pyh_app"), embedder=embedder) as client:
        for expected in ((3, 0), (0, 3)):
            records = scan_source(tmp_path).records
            with client.tenant("acme") as t:
                res = t.ingest(records, corpus_id="docs")
            assert (res.inserted, res.unchanged) == expected
    assert embedder.embedded == 3


def test_ingest_records_checks_embeds_and_writes_each_batch_as_the_session_does(db: Db) -> None:
    from pyhybrid.ingest import ingest_records

    embedder = CountingEmbedder()
    first = ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(_docs()), quiet=True, embedder=embedder,
                           batch_size=2)
    again = ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(_docs()), quiet=True, embedder=embedder)
    assert first == {"inserted": 4, "updated": 0, "unchanged": 0, "superseded": 0, "embedded": 4}
    assert again == {"inserted": 0, "updated": 0, "unchanged": 4, "superseded": 0, "embedded": 0}
    assert embedder.embedded == 4
