"""Durability: BM25 results survive clean restarts, kill -9 of the server and backend crashes.

pg_textsearch 1.0.0 loses its corpus statistics at every restart (the index then answers nothing).
These tests run on an embedded server of their own, since they stop, kill and restart it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
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
from pyhybrid.maintenance import bm25_status
from pyhybrid.server import embedded_status, start_embedded, stop_embedded

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
            c.execute("SELECT hybrid.create_tenant('acme'), hybrid.grant_app(%s)", (APP,))
        chunks = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
        with HybridClient(self.app) as client, client.tenant("acme") as t:
            t.ingest([{k: v for k, v in c.items() if k != "embedding"} for c in chunks])
        assert self.states() == {"hybrid.chunk_content_bm25": "ok"}
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
        with psycopg.connect(self.admin) as c:
            return {s.index_name: s.state for s in bm25_status(c)}


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
    assert server.states() == {"hybrid.chunk_content_bm25": "ok"}
    same(server.lexical(), baseline)


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
    assert server.states() == {"hybrid.chunk_content_bm25": "stale"}
    same(server.lexical(), baseline)
    assert server.states() == {"hybrid.chunk_content_bm25": "ok"}


def test_bm25_results_identical_after_a_backend_crash(server: Server) -> None:
    baseline = server.load()
    server.crash_a_backend()
    assert server.states() == {"hybrid.chunk_content_bm25": "stale"}
    same(server.lexical(), baseline)


def test_stale_bm25_in_a_read_only_transaction_falls_back_to_ts_rank_with_a_warning(
        server: Server) -> None:
    baseline = server.load()
    server.crash_a_backend()
    ts_rank = server.lexical(lexical="ts_rank")
    with psycopg.connect(server.app) as c:
        notices: list[str] = []
        c.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
        c.execute("SET TRANSACTION READ ONLY")
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', true)")
        rows = c.execute("SELECT chunk_id, keyword_rank FROM hybrid_retrieve(query_text => %s, top_k => 10)",
                         (QUERIES[0],)).fetchall()
        assert [f"{QUERIES[0]}|{cid}" for cid, _ in rows] == [x[0] for x in ts_rank[:len(rows)]]
        assert rows, "the fallback must still rank"
        assert any("stale" in n and "ts_rank" in n for n in notices), notices
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="stale"):
            c.execute("SELECT * FROM hybrid_retrieve(query_text => %s, lexical => 'bm25')", (QUERIES[0],))
    assert server.states() == {"hybrid.chunk_content_bm25": "stale"}, "a read-only transaction cannot heal"
    same(server.lexical(), baseline)  # a read-write one does


def test_explicit_bm25_on_a_stale_index_that_cannot_heal_raises_a_typed_error(server: Server) -> None:
    server.load()
    server.crash_a_backend()
    with HybridClient(server.app) as client, client.tenant("acme") as t:
        t.conn.execute("SET TRANSACTION READ ONLY")
        with pytest.raises(RetrievalError, match="stale") as err:
            t.retrieve(query_text=QUERIES[0], lexical="bm25")
    assert err.value.sqlstate == "55000"
    with psycopg.connect(server.admin, autocommit=True) as c:
        c.execute("SELECT * FROM hybrid.heal_bm25()")


def test_doctor_flags_a_stale_bm25_index_and_the_command_it_prints_heals_it(
        server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = server.load()
    server.crash_a_backend()
    assert main(["--dsn", server.admin, "doctor"]) == 1
    out = capsys.readouterr().out
    assert "hybrid.chunk_content_bm25" in out and "STALE" in out
    fix = next(line for line in out.splitlines() if "fix:" in line).split("fix:")[1].split("(")[0].split()
    assert fix[:2] == ["pyhybrid", "doctor"]
    assert main(["--dsn", server.admin, *fix[1:]]) == 0
    out = capsys.readouterr().out
    assert "hybrid.chunk_content_bm25: rebuilt" in out
    assert server.states() == {"hybrid.chunk_content_bm25": "ok"}
    same(server.lexical(), baseline)


def test_heal_rebuilds_nothing_on_a_healthy_server(server: Server) -> None:
    baseline = server.load()
    with psycopg.connect(server.admin, autocommit=True) as c:
        c.execute("SELECT * FROM hybrid.heal_bm25()")
        before = c.execute("SELECT relfilenode FROM pg_class WHERE oid = 'hybrid.chunk_content_bm25'::regclass").fetchone()
        assert c.execute("SELECT * FROM hybrid.heal_bm25()").fetchall() == []
        after = c.execute("SELECT relfilenode FROM pg_class WHERE oid = 'hybrid.chunk_content_bm25'::regclass").fetchone()
    assert before == after
