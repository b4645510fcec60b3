"""ingest_records writes batch k while it embeds batch k+1: the same rows as one batch after the other, and an
error stops at its batch."""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np
import psycopg
import pytest

from pyhybrid import HybridClient, InvalidParameterError
from pyhybrid.ingest import _batches, ingest_records
from tests.conftest import Db
from tests.helpers import DIM, unit

ROWS_SQL = ("SELECT chunk_id, corpus_id, document_id, position, content, embedding::text, acl_labels, metadata, "
            "content_hash, superseded FROM hybrid.chunk WHERE tenant_id = %s ORDER BY chunk_id")


class Embedder:
    """Deterministic vectors; fail_on: the call (1-based) that raises; on_call: called with the call number first."""

    dim = DIM

    def __init__(self, fail_on: int | None = None, on_call: Any = None) -> None:
        self.calls: list[list[str]] = []
        self.fail_on, self.on_call = fail_on, on_call

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if self.on_call is not None:
            self.on_call(len(self.calls))
        if len(self.calls) == self.fail_on:
            raise RuntimeError(f"embedder failed on call {self.fail_on}")
        return np.stack([unit(sum(map(ord, t)) % 10_000) for t in texts])


def _records(version: int = 0) -> list[dict[str, Any]]:
    """Six documents of 1-3 chunks; "d2" comes back after "d4" (a document met again in a later batch)."""
    out = []
    for d, n in ((0, 2), (1, 1), (2, 3), (3, 2), (4, 1)):
        out += [{"chunk_id": f"d{d}#{i}", "document_id": f"d{d}", "position": i, "metadata": {"v": version},
                 "content": f"document {d} part {i}: the pump alarm v{version if d % 2 else 0}"} for i in range(n)]
    out.append({"chunk_id": "d2#9", "document_id": "d2", "position": 9, "content": "d2 again, later"})
    return out


def _rows(db: Db, tenant: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db.dsn()) as c:
        return c.execute(ROWS_SQL, (tenant,)).fetchall()


def _serially(db: Db, tenant: str, records: list[dict[str, Any]], batch_size: int) -> dict[str, int]:
    """The reference: each batch checked, embedded and written by TenantSession.ingest, one after the other."""
    totals = {"inserted": 0, "updated": 0, "unchanged": 0, "superseded": 0}
    with HybridClient(db.dsn("pyh_app"), embedder=Embedder()) as client:
        for batch in _batches(iter([dict(r) for r in records]), batch_size):
            with client.tenant(tenant) as t:
                res = t.ingest(batch, corpus_id="docs")
            for k in totals:
                totals[k] += getattr(res, k)
    return totals


def test_pipelined_ingest_writes_exactly_the_rows_of_the_batches_written_one_after_the_other(db: Db) -> None:
    for version in (0, 1):  # then a re-ingest: odd documents changed, even ones unchanged
        got = ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(_records(version)), batch_size=2, quiet=True,
                             embedder=Embedder())
        want = _serially(db, "globex", _records(version), 2)
        assert {k: got[k] for k in want} == want
    assert _rows(db, "acme") == _rows(db, "globex")
    assert len(_rows(db, "acme")) == 10


def test_the_next_batch_is_embedded_while_the_previous_one_is_written(db: Db, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyhybrid.client import TenantSession

    second_embed_started = threading.Event()
    waited: list[bool] = []
    real_ingest = TenantSession.ingest

    def ingest(self: TenantSession, *a: Any, **kw: Any) -> Any:
        # batch 1's write waits for batch 2's embedding to start: serially it never does (this waits 10 s, fails)
        if not waited:
            waited.append(second_embed_started.wait(10))
        return real_ingest(self, *a, **kw)

    monkeypatch.setattr(TenantSession, "ingest", ingest)
    embedder = Embedder(on_call=lambda call: second_embed_started.set() if call == 2 else None)
    ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(_records()), batch_size=3, quiet=True, embedder=embedder)
    assert waited == [True]
    assert len(_rows(db, "acme")) == 10


def test_an_embedder_failure_writes_the_batches_before_it_and_nothing_of_its_own(db: Db) -> None:
    embedder = Embedder(fail_on=3)
    with pytest.raises(RuntimeError, match="embedder failed on call 3"):
        ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(_records()), batch_size=2, quiet=True,
                       embedder=embedder)
    # batches: [d0#0 d0#1] [d1#0 d2#0 d2#1 d2#2] [d3#0 d3#1] ...: the first two are written, the third is not
    assert [r[0] for r in _rows(db, "acme")] == ["d0#0", "d0#1", "d1#0", "d2#0", "d2#1", "d2#2"]


def test_a_write_failure_stops_at_its_batch_and_raises_its_own_error(db: Db) -> None:
    records = _records()
    records[4]["chunk_id"] = "d2#0"  # twice in the second batch: refused before its COPY, in the writer
    embedder = Embedder()
    with pytest.raises(InvalidParameterError, match=r"chunk_id 'd2#0'.*appears more than once"):
        ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(records), batch_size=2, quiet=True, embedder=embedder)
    assert [r[0] for r in _rows(db, "acme")] == ["d0#0", "d0#1"]
    assert len(embedder.calls) <= 3  # at most the batch after the failing one was embedded, and not written
    assert not [t.name for t in threading.enumerate() if t.name.startswith("pyhybrid-ingest")]


@pytest.mark.parametrize("writers", [2, 4])
def test_several_writers_write_exactly_the_rows_of_the_batches_written_one_after_the_other(db: Db, writers: int) -> None:
    # _records has d2 come back in a later batch: that batch waits for d2's first one
    for version in (0, 1):
        got = ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(_records(version)), batch_size=1, quiet=True,
                             embedder=Embedder(), writers=writers)
        want = _serially(db, "globex", _records(version), 1)
        assert {k: got[k] for k in want} == want
    assert _rows(db, "acme") == _rows(db, "globex")
    many = [{"chunk_id": f"m{i}", "document_id": f"m{i // 3}", "position": i % 3, "content": f"bulk chunk {i} pumps",
             "embedding": unit(i).tolist()} for i in range(600)]  # pre-embedded, as a bulk load is
    got = ingest_records(db.dsn("pyh_app"), "acme", "bulk", iter(many), batch_size=30, quiet=True, writers=writers)
    assert got["inserted"] == 600 and got["embedded"] == 0
    with psycopg.connect(db.dsn()) as c:
        assert c.execute("SELECT count(*), count(DISTINCT document_id) FROM hybrid.chunk WHERE corpus_id = 'bulk'"
                         ).fetchone() == (600, 200)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("pyhybrid-ingest")]


def test_batches_are_written_at_once_with_several_writers(db: Db, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyhybrid.client import TenantSession

    both = threading.Barrier(2, timeout=10)  # two writes in flight together, or a BrokenBarrierError
    met: list[bool] = []
    real_ingest = TenantSession.ingest

    def ingest(self: TenantSession, *a: Any, **kw: Any) -> Any:
        if len(met) < 2:
            both.wait()
            met.append(True)
        return real_ingest(self, *a, **kw)

    monkeypatch.setattr(TenantSession, "ingest", ingest)
    ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(_records()), batch_size=2, quiet=True, embedder=Embedder(),
                   writers=2)
    assert met == [True, True] and len(_rows(db, "acme")) == 10


def test_a_write_failure_with_several_writers_raises_its_own_error_and_writes_no_later_batch_it_had_not_sent(
        db: Db) -> None:
    records = _records()
    records[4]["chunk_id"] = "d2#0"  # the second batch is refused
    with pytest.raises(InvalidParameterError, match=r"chunk_id 'd2#0'.*appears more than once"):
        ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(records), batch_size=2, quiet=True, embedder=Embedder(),
                       writers=2)
    got = [r[0] for r in _rows(db, "acme")]
    assert got[:2] == ["d0#0", "d0#1"] and "d2#0" not in got
    assert set(got) <= {"d0#0", "d0#1", "d3#0", "d3#1"}  # at most the batch sent beside the failing one
    assert not [t.name for t in threading.enumerate() if t.name.startswith("pyhybrid-ingest")]


@pytest.mark.parametrize("writers", [0, 17, 1.5, True, "2"])
def test_writers_must_be_an_integer_from_1_to_16_and_nothing_is_written(db: Db, writers: Any) -> None:
    with pytest.raises(InvalidParameterError, match=r"writers must be an integer from 1 to 16"):
        ingest_records(db.dsn("pyh_app"), "acme", "docs", iter(_records()), quiet=True, embedder=Embedder(),
                       writers=writers)
    assert _rows(db, "acme") == []
