"""Durability: BM25 results survive clean restarts, kill -9 of the server and backend crashes.

pg_textsearch 1.0.0 loses its corpus statistics at every restart (the index then answers nothing).
These tests run on an embedded server of their own, since they stop, kill and restart it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

import psutil
import psycopg
import pytest
from psycopg import conninfo

from pyhybrid import HybridClient, migrate
from pyhybrid.cli import main
from pyhybrid.errors import RetrievalError
from pyhybrid.maintenance import bm25_status, heal_bm25
from pyhybrid.server import embedded_status, start_embedded, start_embedded_standby, stop_embedded

pytestmark = pytest.mark.slow  # servers, binaries or releases of its own: the full tier only

DEMO = Path(__file__).resolve().parent.parent / "pyhybrid" / "demo_data" / "acme_chunks.jsonl"
QUERIES = ["downstream occlusion alarm", "battery charge indicator", "air in line detection bolus",
           "flow rate keypad limits", "software verification protocol"]
APP = "pyh_dur_app"


class Server:
    """An embedded server in a temporary data dir; each test loads a database of its own on it."""

    def __init__(self) -> None:
        self.data_dir = Path(tempfile.mkdtemp(prefix="pyhybrid-durability-")) / "pgdata"
        self.root = start_embedded(self.data_dir)
        with psycopg.connect(self.root, autocommit=True) as c:
            c.execute(f"CREATE ROLE {APP} LOGIN PASSWORD '{APP}'")
        self.count = 0
        self.admin = self.app = ""

    def load(self) -> list[tuple[str, int | None, float | None]]:
        """A new database holding the demo corpus of tenant acme; returns its lexical results.

        The corpus goes into a BM25 index created empty, so it sits in the index's in-memory part,
        which is what a restart loses (an index rebuilt since its last write survives restarts).
        """
        if self.admin:
            with psycopg.connect(self.root, autocommit=True) as c:
                c.execute(f"DROP DATABASE durability_{self.count} WITH (FORCE)")
        self.count += 1
        with psycopg.connect(self.root, autocommit=True) as c:
            c.execute(f"CREATE DATABASE durability_{self.count}")
        self.admin = conninfo.make_conninfo(self.root, dbname=f"durability_{self.count}")
        self.app = conninfo.make_conninfo(self.admin, user=APP, password=APP)
        migrate.upgrade(self.admin)
        with psycopg.connect(self.admin, autocommit=True) as c:
            c.execute("SELECT hybrid.create_tenant('acme', NULL, 'dedicated'), hybrid.grant_app(%s)", (APP,))
        chunks = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
        with HybridClient(self.app) as client, client.tenant("acme") as t:
            t.ingest([{k: v for k, v in c.items() if k != "embedding"} for c in chunks], allow_missing_embeddings=True)
        assert self.states() == {self.bm25: "ok"}
        results = self.lexical()
        assert len(results) >= 40, "the BM25 branch should find hits for every query"
        return results

    def postmaster(self) -> psutil.Process:
        pid = embedded_status(self.data_dir)["pid"]
        assert pid is not None
        return psutil.Process(pid)

    def start_raw(self) -> None:
        """Start the server without pyhybrid's start path (no healing), as a service manager would."""
        import pgserver

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pgserver.get_server(self.data_dir, cleanup_mode=None).ensure_postgres_running()

    def kill_9(self) -> None:
        """SIGKILL the postmaster and every backend (orphaned backends would block a restart)."""
        pm = self.postmaster()
        procs = [pm, *pm.children(recursive=True)]
        for p in procs:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:  # a child that died with the postmaster
                pass
        psutil.wait_procs(procs, timeout=30)

    def crash_a_backend(self) -> None:
        """SIGKILL one backend: the postmaster resets shared memory and restarts all, as after a segfault."""
        with psycopg.connect(self.admin, autocommit=True) as c:
            pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(self.admin, connect_timeout=5) as c:
                    c.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def lexical(self, **kw: Any) -> list[tuple[str, int | None, float | None]]:
        """The lexical branch alone for each query, as the app role acting for acme."""
        out = []
        with HybridClient(self.app) as client, client.tenant("acme") as t:
            for q in QUERIES:
                out += [(q + "|" + r.chunk_id, r.keyword_rank, r.keyword_score)
                        for r in t.retrieve(query_text=q, top_k=10, **kw)]
        return out

    def states(self) -> dict[str, str]:
        with psycopg.connect(self.admin, autocommit=True) as c:
            return {s.index_name: s.state for s in bm25_status(c)}

    def many_tenants(self, n: int) -> list[str]:
        """n more tenants, each with one document in its BM25 index's in-memory part."""
        tenants = [f"many{i:02d}" for i in range(n)]
        with psycopg.connect(self.admin, autocommit=True) as c:
            for t in tenants:
                c.execute("SELECT hybrid.create_tenant(%s, NULL, 'dedicated')", (t,))
        with HybridClient(self.app) as client:
            for i, t in enumerate(tenants):
                with client.tenant(t) as s:
                    s.ingest([{"chunk_id": f"{t}#0", "document_id": t, "content": f"occlusion alarm note {i}"}],
                             allow_missing_embeddings=True)
        return tenants

    @property
    def bm25(self) -> str:
        """acme's BM25 index: its partition's index of hybrid.chunk_content_bm25."""
        with psycopg.connect(self.admin) as c:
            row = c.execute("SELECT i.inhrelid::regclass::text FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid "
                            "WHERE i.inhparent = 'hybrid.chunk_content_bm25'::regclass "
                            "AND x.indrelid = hybrid._chunk_partition(hybrid._tenant_key('acme'))").fetchone()
        assert row is not None
        return str(row[0])


@pytest.fixture(scope="module")
def server(extensions: set[str]) -> Iterator[Server]:
    assert "pg_textsearch" in extensions, "pg_textsearch is not available on the test server (CI's server has it)"
    s = Server()
    yield s
    try:
        stop_embedded(s.data_dir)
    except Exception:  # a test left it crashed or half started: do not leave it running
        if embedded_status(s.data_dir)["running"]:
            s.kill_9()
    shutil.rmtree(s.data_dir.parent, ignore_errors=True)


def same(a: list[tuple[str, int | None, float | None]], b: list[tuple[str, int | None, float | None]]) -> None:
    assert [(x[0], x[1]) for x in a] == [(x[0], x[1]) for x in b], [(x, y) for x, y in zip(a, b) if x != y]
    for x, y in zip(a, b):
        assert x[2] == pytest.approx(y[2], rel=1e-5), x[0]


def test_bm25_results_identical_after_a_clean_restart(server: Server) -> None:
    baseline = server.load()
    stop_embedded(server.data_dir)
    start_embedded(server.data_dir)  # pyhybrid's start path heals before anyone queries
    assert server.states() == {server.bm25: "ok"}
    same(server.lexical(), baseline)


def test_a_restart_heals_the_bm25_indexes_of_many_tenants_that_held_unspilled_documents(server: Server) -> None:
    # pg_textsearch 1.0 holds LWLocks from its first access to an index after a restart to the end
    # of the transaction: one transaction over ~70 such indexes failed ("too many LWLocks taken"),
    # and with it pyhybrid's start path
    baseline = server.load()
    server.many_tenants(80)
    stop_embedded(server.data_dir)
    start_embedded(server.data_dir)
    states = server.states()
    assert len(states) == 81 and set(states.values()) == {"ok"}, states
    same(server.lexical(), baseline)
    with HybridClient(server.app) as client, client.tenant("many79") as s:
        assert [r.chunk_id for r in s.retrieve(query_text="occlusion alarm", top_k=5)] == ["many79#0"]


def test_after_a_restart_outside_pyhybrid_a_tenants_first_search_rebuilds_its_own_bm25_index_alone(
        server: Server) -> None:
    # the first search after a restart used to heal every tenant's index in its own transaction:
    # past ~70 indexes with documents in memory pg_textsearch failed it ("too many LWLocks taken",
    # the lexical branch lost), and below that the one search waited for every tenant's rebuild
    baseline = server.load()
    tenants = server.many_tenants(80)
    stop_embedded(server.data_dir)
    server.start_raw()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed branch is a RetrievalWarning
        with HybridClient(server.app) as client, client.tenant("many79") as s:
            hits = s.retrieve(query_text="occlusion alarm", top_k=5)
    assert [(r.chunk_id, r.keyword_rank) for r in hits] == [("many79#0", 1)]
    states = server.states()
    assert list(states.values()).count("ok") == 1, "only many79's index was rebuilt"
    with psycopg.connect(server.admin) as c:
        mine = c.execute("SELECT hybrid._bm25_partition_index(hybrid._tenant_key('many79'))").fetchone()
        assert mine is not None and states[mine[0]] == "ok"
        before = c.execute("SELECT relfilenode FROM pg_class WHERE oid = %s::regclass", mine).fetchone()
    with HybridClient(server.app) as client, client.tenant("many79") as s:  # another session: no second rebuild
        assert [r.chunk_id for r in s.retrieve(query_text="occlusion alarm", top_k=5)] == ["many79#0"]
    with psycopg.connect(server.admin) as c:
        assert c.execute("SELECT relfilenode FROM pg_class WHERE oid = %s::regclass", mine).fetchone() == before
    same(server.lexical(), baseline)  # acme's own first search heals acme's
    healed = heal_bm25(server.admin)
    assert len(healed) == len(tenants) - 1 and {a.action for a in healed} == {"rebuilt"}
    assert not {mine[0], server.bm25} & {a.index_name for a in healed}
    assert set(server.states().values()) == {"ok"}


def test_one_session_that_serves_every_tenants_first_search_after_a_restart_heals_them_all(
        server: Server) -> None:
    # a first access to a BM25 index after a restart and its REINDEX in one transaction left an
    # LWLock held for the rest of the session: a pooled connection failed with "too many LWLocks
    # taken" at the ~78th tenant it healed
    server.load()
    tenants = server.many_tenants(90)
    stop_embedded(server.data_dir)
    server.start_raw()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with HybridClient(server.app) as client:
            for t in tenants:
                with client.tenant(t) as s:
                    assert [r.chunk_id for r in s.retrieve(query_text="occlusion alarm", top_k=5)] == [f"{t}#0"], t
    assert list(server.states().values()).count("ok") == len(tenants)


def test_heal_bm25_in_one_transaction_rebuilds_the_indexes_of_many_tenants_after_a_restart(
        server: Server) -> None:
    # the first access to each index after a restart held LWLocks to the end of the transaction:
    # SELECT * FROM hybrid.heal_bm25() failed past ~70 tenants with "too many LWLocks taken"
    baseline = server.load()
    tenants = server.many_tenants(90)
    stop_embedded(server.data_dir)
    server.start_raw()
    with psycopg.connect(server.admin) as c:
        healed = c.execute("SELECT index_name, action FROM hybrid.heal_bm25()").fetchall()
    assert len(healed) == len(tenants) + 1 and {a for _, a in healed} == {"rebuilt"}
    assert set(server.states().values()) == {"ok"}
    same(server.lexical(), baseline)


def test_a_tenants_first_search_heals_its_large_bm25_index_when_no_parallel_worker_can_start(
        server: Server) -> None:
    # pg_textsearch 1.0 builds an index of 100,000 rows or more with parallel workers and fails
    # (53000, "could not launch any workers") when none can start, where PostgreSQL's own builds go
    # on alone; the search's heal failed with it, and so did the whole hybrid_retrieve call
    server.load()
    with psycopg.connect(server.admin, autocommit=True) as c:
        c.execute("SELECT hybrid.create_tenant('large', NULL, 'dedicated')")
        c.execute("INSERT INTO hybrid.corpus (tenant_id, corpus_id) VALUES ('large', 'bulk')")
        # as the superuser, without embeddings: 110,000 rows in seconds (the API would take minutes)
        c.execute("INSERT INTO hybrid.chunk (tenant_id, chunk_id, corpus_id, document_id, content, content_hash, tenant_key) "
                  "SELECT 'large', 'c' || g, 'bulk', 'd' || g / 5, 'word' || g % 997 || ' alarm ' || md5(g::text), "
                  "md5(g::text), hybrid._tenant_key('large') FROM generate_series(1, 110000) g")
        c.execute("ANALYZE hybrid.chunk")

    def search(dsn: str) -> list[tuple[str, int | None, float | None]]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with HybridClient(dsn) as client, client.tenant("large") as t:
                return [(r.chunk_id, r.keyword_rank, r.keyword_score) for r in t.retrieve(query_text="word5 alarm", top_k=10)]

    baseline = search(server.app)
    assert len(baseline) == 10 and all(r[1] is not None for r in baseline)
    stop_embedded(server.data_dir)
    server.start_raw()
    no_workers = conninfo.make_conninfo(server.app, options="-c max_parallel_workers=0")
    same(search(no_workers), baseline)
    same(search(server.app), baseline)
    with psycopg.connect(server.admin) as c:
        large = c.execute("SELECT hybrid._bm25_partition_index(hybrid._tenant_key('large'))").fetchone()
    assert large is not None and server.states()[large[0]] == "ok"


def test_bm25_results_identical_after_kill_9_of_the_whole_server(server: Server) -> None:
    baseline = server.load()
    server.kill_9()
    start_embedded(server.data_dir)
    same(server.lexical(), baseline)


def test_a_restart_outside_pyhybrid_leaves_bm25_stale_and_the_first_search_heals_it(
        server: Server) -> None:
    baseline = server.load()
    stop_embedded(server.data_dir)
    server.start_raw()
    assert server.states() == {server.bm25: "stale"}
    same(server.lexical(), baseline)
    assert server.states() == {server.bm25: "ok"}


def test_bm25_results_identical_after_a_backend_crash(server: Server) -> None:
    baseline = server.load()
    server.crash_a_backend()
    assert server.states() == {server.bm25: "stale"}
    same(server.lexical(), baseline)


def test_stale_bm25_in_a_read_only_transaction_is_answered_by_the_sql_scorer_with_the_same_scores(
        server: Server) -> None:
    import warnings

    baseline = server.load()
    server.crash_a_backend()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning any more: BM25 is exact without the index
        with HybridClient(server.app) as client, client.tenant("acme", read_only=True) as t:
            for lexical in (None, "bm25"):
                got = [(q + "|" + r.chunk_id, r.keyword_rank, r.keyword_score)
                       for q in QUERIES for r in t.retrieve(query_text=q, top_k=10, lexical=lexical)]
                same(got, baseline)
            plan = t.explain_retrieve(query_text=QUERIES[0])
    assert "SQL scorer" in next(b["plan"] for b in plan["branches"] if b["branch"] == "lexical")
    assert server.states() == {server.bm25: "stale"}, "a read-only transaction cannot heal"
    same(server.lexical(), baseline)  # a read-write one does


def test_doctor_flags_a_stale_bm25_index_and_the_command_it_prints_heals_it(
        server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = server.load()
    server.crash_a_backend()
    assert main(["--dsn", server.admin, "doctor"]) == 1
    out = capsys.readouterr().out
    assert server.bm25 in out and "STALE" in out
    fix = next(line for line in out.splitlines() if "fix:" in line).split("fix:")[1].split("(")[0].split()
    assert fix[:2] == ["pyhybrid", "doctor"]
    assert main(["--dsn", server.admin, *fix[1:]]) == 0
    out = capsys.readouterr().out
    assert f"{server.bm25}: rebuilt" in out
    assert server.states() == {server.bm25: "ok"}
    same(server.lexical(), baseline)


def test_heal_rebuilds_nothing_on_a_healthy_server(server: Server) -> None:
    server.load()
    with psycopg.connect(server.admin, autocommit=True) as c:
        c.execute("SELECT * FROM hybrid.heal_bm25()")
        before = c.execute("SELECT relfilenode FROM pg_class WHERE oid = %s::regclass", (server.bm25,)).fetchone()
        assert c.execute("SELECT * FROM hybrid.heal_bm25()").fetchall() == []
        after = c.execute("SELECT relfilenode FROM pg_class WHERE oid = %s::regclass", (server.bm25,)).fetchone()
    assert before == after


BATCH = 200
INGEST_SCRIPT = """
import sys
from pyhybrid import HybridClient
from tests.helpers import chunks

with HybridClient(sys.argv[1]) as client:
    for k in range(int(sys.argv[2])):
        batch = chunks(f"b{k}", %d, doc_size=4, seed=k)
        for c in batch:
            c.metadata["batch"] = k
        with client.tenant("acme") as t:
            t.ingest(batch, corpus_id="bulk")
        print(k, flush=True)
""" % BATCH


def _index_matches_heap(conn: psycopg.Connection[Any], order_by: str) -> None:
    """The rows an index scan returns equal those a sequential scan returns (amcheck is not in the embedded build)."""
    q = f"SELECT {order_by} FROM hybrid.chunk ORDER BY {order_by}"
    conn.execute("SET enable_seqscan = off")
    by_index = conn.execute(q).fetchall()
    conn.execute("SET enable_seqscan = on")
    conn.execute("SET enable_indexscan = off")
    conn.execute("SET enable_indexonlyscan = off")
    conn.execute("SET enable_bitmapscan = off")
    by_heap = conn.execute(q).fetchall()
    conn.execute("RESET ALL")
    assert by_index == by_heap


def test_kill_9_during_a_bulk_ingest_leaves_every_batch_whole_or_absent(server: Server) -> None:
    import subprocess
    import sys

    import numpy as np

    from tests.helpers import chunks, unit

    server.load()
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-c", INGEST_SCRIPT, server.app, "40"], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    acked = [int(proc.stdout.readline()) for _ in range(5)]  # five batches committed, the sixth in flight
    server.kill_9()
    proc.wait(timeout=60)
    acked += [int(line) for line in proc.stdout.read().split()]
    start_embedded(server.data_dir)

    with psycopg.connect(server.admin) as c:
        per_batch = dict(c.execute("SELECT (metadata->>'batch')::int, count(*) FROM hybrid.chunk "
                                   "WHERE corpus_id = 'bulk' GROUP BY 1").fetchall())
        assert set(per_batch.values()) <= {BATCH}, "a batch is whole or absent"
        assert set(acked) <= set(per_batch), "every acknowledged batch survived"
        assert len(per_batch) < 40, "the kill came before the end of the load"
        _index_matches_heap(c, "tenant_id, chunk_id")
        _index_matches_heap(c, "tenant_id, document_id")
        assert c.execute("SELECT count(*) FROM hybrid.chunk c JOIN hybrid.corpus p USING (tenant_id, corpus_id)"
                         ).fetchone() == c.execute("SELECT count(*) FROM hybrid.chunk").fetchone()
    committed = sorted(per_batch)

    # BM25 equals a fresh load of the same committed rows (both indexes built by REINDEX)
    with psycopg.connect(server.root, autocommit=True) as c:
        c.execute("DROP DATABASE IF EXISTS durability_fresh WITH (FORCE)")
        c.execute("CREATE DATABASE durability_fresh")
    fresh_admin = conninfo.make_conninfo(server.root, dbname="durability_fresh")
    migrate.upgrade(fresh_admin)
    with psycopg.connect(fresh_admin, autocommit=True) as c:
        c.execute("SELECT hybrid.create_tenant('acme', NULL, 'dedicated'), hybrid.grant_app(%s)", (APP,))
    fresh_app = conninfo.make_conninfo(fresh_admin, user=APP, password=APP)
    with HybridClient(fresh_app) as client:
        demo = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
        with client.tenant("acme") as t:
            t.ingest([{k: v for k, v in d.items() if k != "embedding"} for d in demo], allow_missing_embeddings=True)
        for k in committed:
            batch = chunks(f"b{k}", BATCH, doc_size=4, seed=k)
            for ch in batch:
                ch.metadata["batch"] = k
            with client.tenant("acme") as t:
                t.ingest(batch, corpus_id="bulk")
    for dsn in (server.admin, fresh_admin):
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("REINDEX INDEX hybrid.chunk_content_bm25")

    def lexical(app: str) -> list[tuple[str, float]]:
        with HybridClient(app) as client, client.tenant("acme") as t:
            return [(q + r.chunk_id, round(r.keyword_score or 0, 4))
                    for q in (*QUERIES, "pumps valves alarms item17") for r in t.retrieve(query_text=q, top_k=10)]

    assert lexical(server.app) == lexical(fresh_app)

    # dense: the tenant's nearest chunks equal an exact search over the committed rows
    q = unit(424242)
    with psycopg.connect(server.app) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        got = [r[0] for r in c.execute("SELECT chunk_id FROM hybrid.search_dense(%s::vector, 10)",
                                       ("[" + ",".join(map(str, q.tolist())) + "]",)).fetchall()]
    vectors = {c.chunk_id: np.asarray(c.embedding) for k in committed for c in chunks(f"b{k}", BATCH, doc_size=4, seed=k)}
    exact = sorted(vectors, key=lambda cid: (1 - float(vectors[cid] @ q) / float(np.linalg.norm(vectors[cid])), cid))[:10]
    assert got == exact
    with psycopg.connect(server.root, autocommit=True) as c:
        c.execute("DROP DATABASE durability_fresh WITH (FORCE)")


def test_kill_9_during_the_hnsw_rebuild_of_a_bulk_load_is_reported_and_resumed(
        server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess
    import sys

    server.load()
    with psycopg.connect(server.admin, autocommit=True) as c:
        c.execute("SELECT hybrid.suspend_vector_index()")
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-c", INGEST_SCRIPT, server.app, "30"], cwd=root, check=True,
                   stdout=subprocess.DEVNULL)
    # the rebuild runs in a transaction that says when the index is built and then waits for its input: the
    # kill lands inside the rebuild's transaction, before its commit, whatever the machine's speed (a fixed
    # poll could miss a fast build, and a kill after the commit tests nothing)
    rebuild = subprocess.Popen([sys.executable, "-c", "import sys, psycopg; c = psycopg.connect(sys.argv[1]); "
                                "c.execute('SELECT hybrid.resume_vector_index()'); print('built', flush=True); "
                                "sys.stdin.read()", server.admin],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert rebuild.stdout is not None and rebuild.stdout.readline() == "built\n", "the rebuild failed"
    server.kill_9()
    rebuild.stdin.close()  # type: ignore[union-attr]
    rebuild.wait(timeout=60)
    start_embedded(server.data_dir)

    assert main(["--dsn", server.admin, "doctor"]) == 1
    out = capsys.readouterr().out
    assert "suspended for a bulk load" in out and "fix: SELECT hybrid.resume_vector_index();" in out
    with psycopg.connect(server.admin, autocommit=True) as c:
        assert c.execute("SELECT hybrid.resume_vector_index()").fetchone() == (True,)
        assert c.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = 'hybrid.chunk_embedding_hnsw'::regclass"
                         ).fetchone() == (True,)
        assert c.execute("SELECT count(*) FROM hybrid.chunk WHERE corpus_id = 'bulk'").fetchone() == (30 * BATCH,)
    assert main(["--dsn", server.admin, "doctor"]) == 0, capsys.readouterr().out


def test_backup_and_restore_into_a_fresh_server_as_the_readme_says_gives_identical_results(
        server: Server, tmp_path: Path) -> None:
    import subprocess

    import pgserver

    server.load()
    with HybridClient(server.app) as client:  # a second tenant, pooled, and a graph
        with psycopg.connect(server.admin, autocommit=True) as c:
            c.execute("SELECT hybrid.create_tenant('globex', NULL, 'pool')")
        with client.tenant("globex") as t:
            t.ingest([{"chunk_id": f"g{i}", "document_id": f"g{i}", "content": f"globex valve report {i} keypad"}
                      for i in range(30)], allow_missing_embeddings=True)
            t.add_edges([{"src": "g1", "dst": "g2", "rel": "VERIFIES"}])
        with client.tenant("acme") as t:
            t.add_edges([{"src": "acme:REQ-012#0", "dst": "acme:TP-031#2", "rel": "VERIFIES"}])

    def snapshot(app: str) -> list[tuple]:
        out: list[tuple] = []
        with HybridClient(app) as client:
            for tenant, seed in (("acme", "acme:REQ-012#0"), ("globex", "g1")):
                with client.tenant(tenant) as t:
                    for q in (*QUERIES, "valve report keypad"):
                        out += [(tenant, r.chunk_id, r.keyword_rank, round(r.score, 9))
                                for r in t.retrieve(query_text=q, top_k=10)]
                    out += [(tenant, r.chunk_id, r.graph_rank) for r in t.retrieve(graph_seeds=[seed])]
        return out

    before = snapshot(server.app)
    target_dir = Path(tempfile.mkdtemp(prefix="pyhybrid-restore-")) / "pgdata"
    target = start_embedded(target_dir)
    try:
        bin_dir = Path(pgserver.__file__).parent / "pginstall" / "bin"
        src_host = conninfo.conninfo_to_dict(server.admin)["host"]
        dst_host = conninfo.conninfo_to_dict(target)["host"]
        db = conninfo.conninfo_to_dict(server.admin)["dbname"]
        # the recipe of docs/operations.md's "Backup and restore", read from the docs and run as written
        from tests.docs_blocks import block

        recipe = block("backup-restore").code
        for placeholder, value in (("SRC", src_host), ("DST", dst_host), ("DBNAME", db)):
            recipe = re.sub(rf"\b{placeholder}\b", str(value), recipe)
        env = {k: v for k, v in os.environ.items() if k not in ("PYHYBRID_DSN", "PGPASSWORD")}
        env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")])
        done = subprocess.run(["bash", "-e", "-c", recipe], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        restored = conninfo.make_conninfo(target, dbname=db)

        after = snapshot(conninfo.make_conninfo(restored, user=APP, password=APP))
        assert after == before
        assert main(["--dsn", restored, "doctor"]) == 0
        with HybridClient(conninfo.make_conninfo(restored, user=APP, password=APP)) as client:
            with client.tenant("acme") as t:  # the restored graph takes new edge types and vertices
                assert t.add_edges([{"src": "acme:REQ-001#0", "dst": "acme:entity:new", "rel": "REFINES"}]
                                   ).edges_added == 1
    finally:
        stop_embedded(target_dir)
        shutil.rmtree(target_dir.parent, ignore_errors=True)


def _start_standby(server: Server) -> tuple[Path, str]:
    top = Path(tempfile.mkdtemp(prefix="pyhybrid-standby-"))
    dsn = start_embedded_standby(server.data_dir, top)
    return top, conninfo.make_conninfo(dsn, dbname=conninfo.conninfo_to_dict(server.admin)["dbname"])


def _stop_standby(top: Path, server: Server) -> None:
    stop_embedded(top / "data")
    shutil.rmtree(top, ignore_errors=True)


def test_a_hot_standby_serves_reads_as_the_primary_bm25_by_the_sql_scorer(server: Server) -> None:
    import warnings

    from pyhybrid import LexicalFallbackWarning
    from tests.helpers import chunks, unit

    server.load()
    with HybridClient(server.app) as c, c.tenant("acme") as t:
        t.ingest(chunks("v", 60, doc_size=3, seed=5), corpus_id="vectors")
        t.add_edges([{"src": "v-1", "dst": "v-7", "rel": "VERIFIES"}, {"src": "v-7", "dst": "acme:entity:x",
                                                                        "rel": "MENTIONS"}])
    top, standby_admin = _start_standby(server)
    try:
        standby_app = conninfo.make_conninfo(standby_admin, user=APP, password=APP)
        q = unit(9191)
        with HybridClient(server.app, replicas=[standby_app]) as client:
            def reads(**kw: Any) -> list[list[tuple[str, Any]]]:
                with client.tenant("acme", **kw) as t:
                    return [[(r.chunk_id, r.vector_rank) for r in t.retrieve(query_embedding=q, top_k=10)],
                            [(r.chunk_id, r.graph_rank) for r in t.retrieve(graph_seeds=["v-1"], graph_hops=2)],
                            [(r.chunk_id, r.keyword_rank) for r in t.retrieve(query_text=QUERIES[0],
                                                                              lexical="ts_rank")],
                            # BM25: pg_textsearch's index on the primary, the SQL scorer on the standby; the texts
                            # are short (no quantized length), so the scores agree to float4 rounding
                            [(r.chunk_id, round(r.keyword_score, 5)) for r in t.retrieve(
                                query_text="pumps valves alarms item7", lexical="bm25", top_k=20)]]

            with client.tenant("acme") as t:  # a write through the client: the standby must replay it
                t.ingest([{"chunk_id": "late", "document_id": "late", "content": "downstream occlusion alarm late"}],
                         corpus_id="late", allow_missing_embeddings=True)
            primary = reads()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                standby = reads(read_only=True, read_your_writes=True)
                with client.tenant("acme", read_only=True) as t:
                    auto = [(r.chunk_id, r.keyword_rank) for r in t.retrieve(query_text=QUERIES[0])]
                with client.tenant("acme", read_only=True) as t:
                    plan = t.explain_retrieve(query_text=QUERIES[0])
            assert standby == primary and any(cid == "late" for cid, _ in standby[2])
            assert standby[3][0][0] == "v-7" and len(standby[3]) == 20
            assert auto and auto[0][0] == "late"  # the default lexical ranking is BM25 there too
            assert not any(issubclass(w.category, LexicalFallbackWarning) for w in caught)
            lexical = next(b for b in plan["branches"] if b["branch"] == "lexical")["plan"]
            assert lexical.startswith("BM25 by the SQL scorer") and "stale" in lexical
        with psycopg.connect(standby_admin) as c:
            assert c.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
    finally:
        _stop_standby(top, server)
