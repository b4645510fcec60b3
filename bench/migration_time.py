"""How long the upgrade into per-tenant partitions (revision 0004) takes, per million chunks.

An unpartitioned install is built with the OLD code (a git worktree at --old-tree, default a checkout of
291dbad, the last commit before revision 0004 tenant_partitions: its migrations stop at 0003):
--chunks chunks over 100 Zipf tenants (bench/latency.py's World / make_tenant of that tree: 384-d
clustered vectors, Zipf text), ingested through that tree's pyhybrid as the app role inside
HybridClient(admin).bulk_load() (HNSW dropped during the load, rebuilt on exit), plus --edges edges
through add_edges, then VACUUM ANALYZE. Before upgrading, that code answers a few dense (exact, and at
the default threshold) and graph (1 and 2 hops) retrievals per checked tenant and the per-tenant row
counts and checksums of chunk ids, contents and embeddings are taken.

Then the upgrade runs exactly as a user runs it, with this tree's pyhybrid: `pyhybrid --dsn DSN migrate`
(the console script, in a subprocess), timed end to end. Meanwhile: the server's summed RSS/PSS
(psutil), the data directory's size, pg_stat_progress_create_index (every index build, with its phase
and first/last time seen) and, through log_min_duration_statement = 1 s, each statement of the upgrade
that took over a second (the 0004 file as one; the BM25 file; each sql/idempotent file, 045 building
the HNSW indexes). Afterwards the same checks run against the upgraded database and are compared.

    git worktree add --detach /tmp/wt-old 291dbad
    PYTHONPATH=. python bench/migration_time.py --chunks 500000 --edges 50000 --old-tree /tmp/wt-old \
        --drop-dependent-policies --build-maintenance-work-mem 1GB --out bench/results/migration_time.json

(the run in bench/results/migration_time.*, on a loaded machine: 1M did not fit in the time left). Without
--drop-dependent-policies the upgrade of a 291dbad install fails (see migration_time_asis_291dbad_3k.md).
Stages can be run alone (--stage build | upgrade | all); the data dir is kept with --keep.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
DB = "bench_migration"
APP_ROLE = "bench_app"
SERVER_SETTINGS = {  # as bench/latency.py
    "shared_buffers": "2GB",
    "effective_cache_size": "8GB",
    "maintenance_work_mem": "1GB",
    "max_wal_size": "4GB",
}
N_QUERIES = 4  # per checked tenant


def dsn_for(admin_dsn: str, db: str, user: str = "postgres") -> str:
    host = admin_dsn.split("host=", 1)[1]
    return f"postgresql://{user}:@/{db}?host={host}"


def dir_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().split()[0])


class Sampler:
    """Server RSS/PSS (summed over postgres processes), data dir size, and index builds, in a thread."""

    def __init__(self, data_dir: Path, admin_dsn: str | None = None, interval: float = 0.5) -> None:
        import psutil

        self.psutil = psutil
        self.data_dir = data_dir
        self.admin_dsn = admin_dsn
        self.interval = interval
        self.peak_rss = self.peak_pss = self.peak_disk = 0
        self.index_timeline: list[dict[str, Any]] = []
        self.activity: list[dict[str, Any]] = []
        self.t0 = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _mem(self) -> tuple[int, int]:
        pm = self.psutil.Process(postmaster_pid(self.data_dir))
        rss = pss = 0
        for p in [pm, *pm.children(recursive=True)]:
            try:
                mi = p.memory_full_info()
                rss += mi.rss
                pss += getattr(mi, "pss", mi.rss)
            except (self.psutil.NoSuchProcess, self.psutil.AccessDenied):
                continue
        return rss, pss

    def _run(self) -> None:
        conn = None
        n = 0
        while not self._stop.is_set():
            try:
                rss, pss = self._mem()
                self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
                if n % 4 == 0:
                    self.peak_disk = max(self.peak_disk, dir_size(self.data_dir))
                if self.admin_dsn:
                    if conn is None:
                        conn = psycopg.connect(self.admin_dsn, autocommit=True)
                    now = round(time.perf_counter() - self.t0, 1)
                    for pid, relid, idx, cmd, phase, pt, pd, td in conn.execute(
                            "SELECT pid, relid::bigint, index_relid::bigint, command, phase, partitions_total, "
                            "partitions_done, tuples_done FROM pg_stat_progress_create_index").fetchall():
                        key = [pid, cmd, relid, idx, phase, pt]
                        last = next((e for e in reversed(self.index_timeline) if e["pid"] == pid), None)
                        if last is not None and last["key"] == key and pd >= last["partitions_done_last"]:
                            last.update(last_s=now, partitions_done_last=pd, tuples_done=td)
                        else:
                            self.index_timeline.append({"pid": pid, "key": key, "first_s": now, "last_s": now,
                                                        "partitions_done_first": pd, "partitions_done_last": pd,
                                                        "tuples_done": td})
                    for pid, q, st, wt, we in conn.execute(
                            "SELECT pid, left(query, 200), state, wait_event_type, wait_event FROM pg_stat_activity "
                            "WHERE datname = %s AND backend_type = 'client backend' AND pid <> pg_backend_pid() "
                            "AND state <> 'idle'", (DB,)).fetchall():
                        first = next((ln.strip() for ln in q.splitlines() if ln.strip()), "")[:120]
                        last = next((e for e in reversed(self.activity) if e["pid"] == pid), None)
                        if last is not None and last["query"] == first:
                            last["last_s"] = now
                            last["samples"] += 1
                            if wt:
                                last["waits"][f"{wt}:{we}"] = last["waits"].get(f"{wt}:{we}", 0) + 1
                        else:
                            self.activity.append({"pid": pid, "query": first, "first_s": now, "last_s": now,
                                                  "samples": 1, "waits": {f"{wt}:{we}": 1} if wt else {}})
            except Exception:
                conn = None
            n += 1
            self._stop.wait(self.interval)
        if conn is not None:
            conn.close()

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def report(self) -> dict[str, Any]:
        mb = 1024 * 1024
        return {"peak_server_rss_mb": round(self.peak_rss / mb, 1), "peak_server_pss_mb": round(self.peak_pss / mb, 1),
                "peak_data_dir_mb": round(self.peak_disk / mb, 1)}


# ----------------------------------------------------------------------------- checks (plain SQL: both versions)

CHECK_SQL = """
SELECT tenant_id, count(*) AS chunks, count(*) FILTER (WHERE superseded) AS superseded,
       md5(string_agg(chunk_id, ',' ORDER BY chunk_id)) AS ids_md5,
       sum(('x' || substr(md5(chunk_id || document_id || content || embedding::text), 1, 15))::bit(60)::bigint
           % 1000000007) AS rows_sum
FROM hybrid.chunk GROUP BY tenant_id ORDER BY tenant_id"""


def table_checks(db_dsn: str) -> dict[str, Any]:
    with psycopg.connect(db_dsn) as conn:
        conn.execute("SET max_parallel_workers_per_gather = 0")
        rows = conn.execute(CHECK_SQL).fetchall()
        per = {t: {"chunks": n, "superseded": s, "ids_md5": m, "rows_sum": int(h)} for t, n, s, m, h in rows}
        conn.execute("SET search_path = pg_catalog, public, ag_catalog")
        edges = conn.execute("SELECT count(*) FROM hybrid_graph._ag_label_edge").fetchone()[0]
        nodes = conn.execute("SELECT count(*) FROM hybrid.graph_node").fetchone()[0]
        rev = conn.execute("SELECT version_num FROM public.alembic_version").fetchone()[0]
    return {"tenants": per, "chunks": sum(v["chunks"] for v in per.values()), "edges": edges, "graph_nodes": nodes,
            "alembic_revision": rev}


def retrievals(app_dsn: str, probes: dict[str, Any]) -> dict[str, Any]:
    """Dense (exact_threshold forced high: exact; and the default: HNSW where the tenant is large) and graph
    (1 and 2 hops) answers for the probe queries, as the app role acting for each tenant."""
    out: dict[str, Any] = {}
    with psycopg.connect(app_dsn, autocommit=True) as conn:
        for tenant, qs in probes.items():
            res = []
            for q in qs:
                with conn.transaction():
                    conn.execute("SELECT set_config('hybrid.tenant_id', %s, true)", (tenant,))
                    r: dict[str, Any] = {}
                    t0 = time.perf_counter()
                    r["dense_exact"] = [[c, round(v, 6)] for c, v in conn.execute(
                        "SELECT chunk_id, value FROM hybrid.search_dense(%s::vector, 10, NULL, NULL, 100000000)",
                        (q["vector"],)).fetchall()]
                    r["dense_exact_ms"] = round(1000 * (time.perf_counter() - t0), 1)
                    t0 = time.perf_counter()
                    r["dense_default"] = [c for (c,) in conn.execute(
                        "SELECT chunk_id FROM hybrid.search_dense(%s::vector, 10)", (q["vector"],)).fetchall()]
                    r["dense_default_ms"] = round(1000 * (time.perf_counter() - t0), 1)
                    for hops in (1, 2):
                        r[f"graph_{hops}hop"] = [[c, v] for c, v in conn.execute(
                            "SELECT chunk_id, value FROM hybrid.search_graph(%s::text[], %s, 30)",
                            (q["seeds"], hops)).fetchall()]
                res.append(r)
            out[tenant] = res
    return out


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    tb, ta = before["tables"], after["tables"]
    same_tenants = tb["tenants"] == ta["tenants"]
    diff_tenants = sorted(t for t in set(tb["tenants"]) | set(ta["tenants"])
                          if tb["tenants"].get(t) != ta["tenants"].get(t))
    rb, ra = before["retrievals"], after["retrievals"]
    n = exact_same = default_same = g1_same = g2_same = g1_set = g2_set = 0
    overlap = []
    for tenant, qs in rb.items():
        for qb, qa in zip(qs, ra[tenant]):
            n += 1
            exact_same += qb["dense_exact"] == qa["dense_exact"]
            default_same += qb["dense_default"] == qa["dense_default"]
            overlap.append(len(set(qb["dense_default"]) & set(qa["dense_default"])) / max(1, len(qb["dense_default"])))
            g1_same += qb["graph_1hop"] == qa["graph_1hop"]
            g2_same += qb["graph_2hop"] == qa["graph_2hop"]
            g1_set += sorted(map(tuple, qb["graph_1hop"])) == sorted(map(tuple, qa["graph_1hop"]))
            g2_set += sorted(map(tuple, qb["graph_2hop"])) == sorted(map(tuple, qa["graph_2hop"]))
    return {
        "tenant_rows_identical": same_tenants, "tenants_differing": diff_tenants,
        "chunks_before": tb["chunks"], "chunks_after": ta["chunks"],
        "edges_before": tb["edges"], "edges_after": ta["edges"],
        "graph_nodes_before": tb["graph_nodes"], "graph_nodes_after": ta["graph_nodes"],
        "queries": n, "dense_exact_identical": exact_same, "dense_default_identical": default_same,
        "dense_default_mean_overlap_at_10": round(sum(overlap) / max(1, len(overlap)), 3),
        "graph_1hop_identical": g1_same, "graph_2hop_identical": g2_same,
        "graph_1hop_same_set": g1_set, "graph_2hop_same_set": g2_set,
    }


# ----------------------------------------------------------------------------- build (old code)


def stage_build(args: argparse.Namespace) -> None:
    """Runs with the OLD tree first on sys.path (set by main through PYTHONPATH)."""
    import numpy as np
    import pyhybrid
    from pyhybrid import Chunk, Edge, connect, migrate

    old = Path(args.old_tree).resolve()
    if not Path(pyhybrid.__file__).resolve().is_relative_to(old):
        raise SystemExit(f"build stage imported pyhybrid from {pyhybrid.__file__}, not {old}")
    sys.path.insert(0, str(old))
    from bench import latency as L  # the old tree's generator and server helpers

    data_dir = Path(args.data_dir)
    from pyhybrid.server import start_embedded

    admin = start_embedded(data_dir)
    admin = L.configure_server(data_dir, admin)
    # the old install's one HNSW index over all chunks builds much faster when its graph fits in memory:
    # only for the build (not measured); the upgrade runs with SERVER_SETTINGS (1GB)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET maintenance_work_mem = '{args.build_maintenance_work_mem}'")
        conn.execute("SELECT pg_reload_conf()")
    report: dict[str, Any] = {"old_tree_commit": subprocess.run(["git", "-C", str(old), "rev-parse", "HEAD"],
                                                                capture_output=True, text=True).stdout.strip(),
                              "old_pyhybrid": pyhybrid.__file__}
    t0 = time.perf_counter()
    db_dsn = L.setup_database(admin, DB)  # migrate.upgrade (old head), 100 tenants, grant_app
    report["setup_s"] = round(time.perf_counter() - t0, 1)
    app_dsn = dsn_for(admin, DB, APP_ROLE)

    t0 = time.perf_counter()
    world = L.World(args.seed)
    rng = np.random.default_rng(args.seed + args.chunks)
    sizes = L.tenant_sizes(args.chunks)
    tenants = [L.make_tenant(world, f"t{i:03d}", n, rng) for i, n in enumerate(sizes)]
    report["generate_s"] = round(time.perf_counter() - t0, 1)
    print(f"generated {args.chunks} chunks in {report['generate_s']} s", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    done = 0
    with connect(db_dsn) as adm, connect(app_dsn) as client:
        with adm.bulk_load():
            for td in tenants:
                for lo, hi in L.doc_batches(td, args.batch):
                    chunks = [Chunk(chunk_id=td.chunk_ids[j], document_id=td.doc_ids[j], content=td.texts[j],
                                    embedding=td.vectors[j], position=int(td.positions[j]),
                                    metadata={"title": f"{td.doc_ids[j]} part {int(td.positions[j])}",
                                              "topic": int(td.clusters[j])})
                              for j in range(lo, hi)]
                    with client.tenant(td.tenant_id) as t:
                        r = t.ingest(chunks, corpus_id="main")
                    assert r.inserted == hi - lo and r.superseded == 0, r
                    done += hi - lo
                    if done % 100_000 < hi - lo:
                        print(f"ingested {done} ({done / (time.perf_counter() - t0):.0f}/s)", file=sys.stderr, flush=True)
            t_loaded = time.perf_counter()
            print(f"loaded in {t_loaded - t0:.1f} s; rebuilding HNSW (old code)", file=sys.stderr, flush=True)
        t_built = time.perf_counter()
    report["ingest_s"] = round(t_loaded - t0, 1)
    report["hnsw_rebuild_s"] = round(t_built - t_loaded, 1)
    print(f"HNSW rebuilt in {report['hnsw_rebuild_s']} s", file=sys.stderr, flush=True)

    # edges: about --edges in all, in proportion to tenant size; NEXT within a document, RELATED in a topic
    t0 = time.perf_counter()
    erng = np.random.default_rng(args.seed + 1)
    added = 0
    edge_srcs: dict[str, list[str]] = {}  # graph probes start from chunks that have edges
    with connect(app_dsn) as client:
        for td in tenants:
            n = len(td.chunk_ids)
            want = int(round(args.edges * n / args.chunks))
            if want == 0 or n < 2:
                continue
            by_cluster = {int(c): np.flatnonzero(td.clusters == c) for c in np.unique(td.clusters)}
            edges: list[Any] = []
            seen = set()
            while len(edges) < want:
                s = int(erng.integers(n))
                if erng.random() < 0.3 and s + 1 < n and td.doc_ids[s + 1] == td.doc_ids[s]:
                    e = (td.chunk_ids[s], td.chunk_ids[s + 1], "NEXT")
                else:
                    pool = by_cluster[int(td.clusters[s])]
                    d = int(pool[erng.integers(len(pool))]) if len(pool) > 1 else int(erng.integers(n))
                    if d == s:
                        continue
                    e = (td.chunk_ids[s], td.chunk_ids[d], "RELATED")
                if e not in seen:
                    seen.add(e)
                    edges.append(Edge(*e))
            edge_srcs[td.tenant_id] = [e.src for e in edges[:60]]
            for i in range(0, len(edges), 30_000):
                with client.tenant(td.tenant_id) as t:
                    added += t.add_edges(edges[i:i + 30_000]).edges_added
    report["edges_added"] = added
    report["edges_s"] = round(time.perf_counter() - t0, 1)
    print(f"{added} edges in {report['edges_s']} s", file=sys.stderr, flush=True)

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET maintenance_work_mem = '{SERVER_SETTINGS['maintenance_work_mem']}'")
        conn.execute("SELECT pg_reload_conf()")
    report["build_maintenance_work_mem"] = args.build_maintenance_work_mem
    t0 = time.perf_counter()
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    report["vacuum_analyze_s"] = round(time.perf_counter() - t0, 1)

    # probe queries: the largest tenant, the ~1% one, a mid-size and a small one
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    picks = {order[0], min(range(len(sizes)), key=lambda i: abs(sizes[i] / args.chunks - 0.01)), order[30], order[-1]}
    qrng = np.random.default_rng(args.seed + 2)
    probes = {}
    for i in sorted(picks):
        qs = L.make_queries(world, tenants[i], N_QUERIES, qrng)
        srcs = edge_srcs.get(tenants[i].tenant_id) or []
        probes[tenants[i].tenant_id] = [
            {"vector": L.vector_literal(q.vector),
             "seeds": [srcs[int(j)] for j in qrng.choice(len(srcs), size=min(3, len(srcs)), replace=False)] if srcs else q.seeds}
            for q in qs]
    report["probe_tenants"] = {tenants[i].tenant_id: sizes[i] for i in sorted(picks)}
    t0 = time.perf_counter()
    report["before"] = {"tables": table_checks(db_dsn), "retrievals": retrievals(app_dsn, probes)}
    report["checks_s"] = round(time.perf_counter() - t0, 1)
    report["probes"] = probes
    with psycopg.connect(db_dsn) as conn:
        report["before"]["indexes"] = [r[0] for r in conn.execute(
            "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'hybrid.chunk'::regclass ORDER BY 1")]
    Path(args.state).write_text(json.dumps(report) + "\n")
    print(f"built; state in {args.state}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- upgrade (this tree)


def stage_upgrade(args: argparse.Namespace) -> dict[str, Any]:
    import pyhybrid

    if not Path(pyhybrid.__file__).resolve().is_relative_to(ROOT):
        raise SystemExit(f"upgrade stage imported pyhybrid from {pyhybrid.__file__}, not {ROOT}")
    from pyhybrid.server import start_embedded

    state = json.loads(Path(args.state).read_text())
    data_dir = Path(args.data_dir)
    admin = start_embedded(data_dir)
    db_dsn, app_dsn = dsn_for(admin, DB), dsn_for(admin, DB, APP_ROLE)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET log_min_duration_statement = '1s'")
        conn.execute("SELECT pg_reload_conf()")
        conn.execute("CHECKPOINT")
        settings = dict(conn.execute("SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
                                     ([*SERVER_SETTINGS, "work_mem", "max_parallel_maintenance_workers",
                                       "log_min_duration_statement"],)).fetchall())
    with psycopg.connect(db_dsn) as conn:
        rev_before = conn.execute("SELECT version_num FROM public.alembic_version").fetchone()[0]
        db_mb_before = conn.execute("SELECT pg_database_size(current_database()) / 1048576.0").fetchone()[0]
    dir_before = dir_size(data_dir)
    log_path = data_dir / "log"
    log_offset = log_path.stat().st_size if log_path.exists() else 0

    dropped: list[str] = []
    if args.drop_dependent_policies:
        # workaround, not what a user would do: policies of other tables that read hybrid.chunk (at 291dbad,
        # graph_node_app on hybrid.graph_node) follow the renamed table and make 0004's DROP TABLE
        # hybrid.chunk_unpartitioned fail; sql/idempotent/ (re-applied by the same upgrade) re-creates them
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            t0 = time.perf_counter()
            for pol, rel in conn.execute(
                    "SELECT DISTINCT p.polname, p.polrelid::regclass::text FROM pg_depend d "
                    "JOIN pg_policy p ON d.classid = 'pg_policy'::regclass AND d.objid = p.oid "
                    "WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = 'hybrid.chunk'::regclass "
                    "AND p.polrelid <> 'hybrid.chunk'::regclass").fetchall():
                conn.execute(f'DROP POLICY "{pol}" ON {rel}')
                dropped.append(f"{pol} ON {rel}")
            drop_s = time.perf_counter() - t0
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [str(Path(sys.executable).with_name("pyhybrid")), "--dsn", db_dsn, "migrate"]
    started = dt.datetime.now(dt.timezone.utc)
    with Sampler(data_dir, admin) as s:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        total = time.perf_counter() - t0
    ended = dt.datetime.now(dt.timezone.utc)
    print(proc.stdout, proc.stderr, file=sys.stderr, flush=True)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM RESET log_min_duration_statement")
        conn.execute("SELECT pg_reload_conf()")

    slow = []
    if log_path.exists():
        with log_path.open("rb") as f:
            f.seek(log_offset)
            text = f.read().decode("utf-8", "replace")
        for m in re.finditer(r"^(\d{4}-\d\d-\d\d \S+ \S+) [^\n]*?duration: ([0-9.]+) ms\s+statement: (.*?)(?=^\d{4}-\d\d-\d\d \d\d:|\Z)", text,
                             re.M | re.S):
            stmt = m.group(3).strip()
            first = next((ln.strip() for ln in stmt.splitlines() if ln.strip() and not ln.strip().startswith("--")), "")
            slow.append({"logged_at": m.group(1), "seconds": round(float(m.group(2)) / 1000, 1),
                         "statement_starts": stmt.splitlines()[0][:120], "first_sql_line": first[:160],
                         "chars": len(stmt)})
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).with_name(Path(args.out).stem + "_server_log.txt").write_text(
            "\n".join(ln[:400] for ln in text.splitlines()) + "\n")

    with psycopg.connect(db_dsn) as conn:
        db_mb_after_raw = conn.execute("SELECT pg_database_size(current_database()) / 1048576.0").fetchone()[0]
    report: dict[str, Any] = {
        "command": " ".join(cmd[:2] + ["<dsn>"] + cmd[3:]),
        "returncode": proc.returncode, "stdout": proc.stdout[-2000:], "stderr": proc.stderr[-4000:],
        "started_utc": started.isoformat(timespec="seconds"), "ended_utc": ended.isoformat(timespec="seconds"),
        "total_s": round(total, 1), "server_settings": settings,
        "workaround_dropped_policies": dropped, "workaround_s": round(drop_s, 3) if dropped else None,
        "alembic_before": rev_before,
        "database_mb_before": round(float(db_mb_before), 1), "database_mb_after": round(float(db_mb_after_raw), 1),
        "data_dir_mb_before": round(dir_before / 1048576, 1), "data_dir_mb_after": round(dir_size(data_dir) / 1048576, 1),
        **s.report(),
        "slow_statements": slow,
        "index_builds": s.index_timeline, "activity": s.activity,
    }
    if proc.returncode != 0:
        return report
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
    report["data_dir_mb_after_checkpoint"] = round(dir_size(data_dir) / 1048576, 1)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        t0 = time.perf_counter()
        conn.execute("ANALYZE")
        report["analyze_after_s"] = round(time.perf_counter() - t0, 1)
        report["partitions"] = conn.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'hybrid.chunk'::regclass").fetchone()[0]
        report["indexes_on_parent"] = [r[0] for r in conn.execute(
            "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'hybrid.chunk'::regclass ORDER BY 1")]
    after = {"tables": table_checks(db_dsn), "retrievals": retrievals(app_dsn, state["probes"])}
    report["after_alembic"] = after["tables"]["alembic_revision"]
    report["verify"] = compare(state["before"], after)
    report["after"] = after
    return report


def markdown(rep: dict[str, Any]) -> str:
    b, u = rep["build"], rep["upgrade"]
    chunks = b["before"]["tables"]["chunks"]
    lines = [f"# Upgrade into per-tenant partitions (revision 0004): {chunks:,} chunks", "",
             f"Built with the old code ({b['old_tree_commit'][:7]}, alembic {u['alembic_before']}); upgraded with "
             f"`{u['command']}` at {rep['engine_commit'][:7]}. {rep['machine_note']}", ""]
    if u.get("workaround_dropped_policies"):
        lines += [f"**Not exactly a user's upgrade**: as-is, the upgrade of this install fails (0004's `DROP TABLE "
                  f"hybrid.chunk_unpartitioned`: policy graph_node_app on table hybrid.graph_node depends on it). "
                  f"Before `pyhybrid migrate`, this run dropped {', '.join(u['workaround_dropped_policies'])} "
                  f"({u['workaround_s']} s, its own transaction); the upgrade's re-applied sql/idempotent/ re-creates it.", ""]
    if u["returncode"] != 0:
        lines += [f"**The upgrade failed** (exit {u['returncode']}) after {u['total_s']} s:", "", "```",
                  u["stderr"][-3000:], "```"]
        return "\n".join(lines) + "\n"
    v = u["verify"]
    per_m = u["total_s"] / (chunks / 1e6)
    lines += [
        "| | |", "|---|---:|",
        f"| chunks | {chunks:,} in {len(b['before']['tables']['tenants'])} tenants |",
        f"| edges | {v['edges_before']:,} |",
        f"| upgrade, end to end (`pyhybrid migrate`) | {u['total_s']:.1f} s |",
        f"| seconds per million chunks (measured rate) | {per_m:.0f} s |",
        f"| peak server memory (summed RSS / PSS of postgres processes) | {u['peak_server_rss_mb']:,.0f} / {u['peak_server_pss_mb']:,.0f} MB |",
        f"| database size before / after | {u['database_mb_before']:,.0f} / {u['database_mb_after']:,.0f} MB |",
        f"| data directory before / peak during / after (after a checkpoint) | {u['data_dir_mb_before']:,.0f} / "
        f"{u['peak_data_dir_mb']:,.0f} / {u['data_dir_mb_after']:,.0f} ({u.get('data_dir_mb_after_checkpoint', 0):,.0f}) MB |",
        f"| partitions after | {u.get('partitions')} |", "",
        "Statements of the upgrade over 1 s (server log, log_min_duration_statement):", "",
        "| seconds | statement |", "|---:|---|"]
    for st in u["slow_statements"]:
        lines.append(f"| {st['seconds']:.1f} | `{st['statement_starts'][:90].replace('|', '/')}` ... `{st['first_sql_line'][:60].replace('|', '/')}` |")
    if u.get("activity"):
        lines += ["", "Timeline (pg_stat_activity and pg_stat_progress_create_index, sampled every 0.5 s from the start "
                  "of `pyhybrid migrate`; seconds first-last seen):", "", "| from | to | what |", "|---:|---:|---|"]
        for a in u["activity"]:
            lines.append(f"| {a['first_s']:.0f} | {a['last_s']:.0f} | statement `{a['query'][:90].replace('|', '/')}` |")
        # one CREATE INDEX on the parent = consecutive samples whose partitions_done never goes down
        runs: list[dict[str, Any]] = []
        for ib in u["index_builds"]:
            _pid, cmd, _rel, _idx, phase, pt = ib["key"]
            r = runs[-1] if runs else None
            if r is None or r["cmd"] != cmd or ib["partitions_done_first"] < r["done_last"]:
                runs.append({"cmd": cmd, "first_s": ib["first_s"], "last_s": ib["last_s"], "pt": pt,
                             "done_first": ib["partitions_done_first"], "done_last": ib["partitions_done_last"],
                             "phases": [phase]})
            else:
                r.update(last_s=ib["last_s"], done_last=ib["partitions_done_last"])
                if phase not in r["phases"]:
                    r["phases"].append(phase)
        for r in runs:
            lines.append(f"| {r['first_s']:.0f} | {r['last_s']:.0f} | &nbsp;&nbsp;{r['cmd']} on the parent, partitions "
                         f"{r['done_first']}-{r['done_last']} of {r['pt']} done while seen; phases: "
                         f"{'; '.join(ph.replace('building index: ', '') for ph in r['phases'])[:140]} |")
    lines += ["", "Verification (old code before, this code after):", "",
              f"- rows per tenant (count, superseded, md5 of ids, checksum of id+document+content+embedding): "
              f"{'identical for every tenant' if v['tenant_rows_identical'] else 'DIFFER: ' + ', '.join(v['tenants_differing'])}",
              f"- chunks {v['chunks_before']:,} -> {v['chunks_after']:,}; edges {v['edges_before']:,} -> {v['edges_after']:,}; "
              f"graph nodes {v['graph_nodes_before']:,} -> {v['graph_nodes_after']:,}",
              f"- {v['queries']} probe queries over {len(b['probe_tenants'])} tenants ({', '.join(f'{t}: {n:,}' for t, n in b['probe_tenants'].items())} chunks):",
              f"  dense exact top 10 (ids and distances) identical {v['dense_exact_identical']}/{v['queries']}; "
              f"dense at the default threshold identical {v['dense_default_identical']}/{v['queries']} "
              f"(mean overlap@10 {v['dense_default_mean_overlap_at_10']}; old: one HNSW index over all tenants, new: one per partition);",
              f"  graph 1 hop identical {v['graph_1hop_identical']}/{v['queries']} (same set {v['graph_1hop_same_set']}), "
              f"2 hops identical {v['graph_2hop_identical']}/{v['queries']} (same set {v['graph_2hop_same_set']})",
              "", f"Build of the old install: generate {b['generate_s']} s, ingest {b['ingest_s']} s, HNSW rebuild "
              f"{b['hnsw_rebuild_s']} s, {b['edges_added']:,} edges in {b['edges_s']} s."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=1_000_000)
    ap.add_argument("--edges", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1000, help="chunks per ingest call")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--old-tree", default="/tmp/wt-old", help="a worktree of the old code (migrations up to 0003)")
    ap.add_argument("--stage", choices=["all", "build", "upgrade"], default="all")
    ap.add_argument("--data-dir", default=None, help="the embedded server's data dir (default: a new one under /tmp)")
    ap.add_argument("--state", default=None, help="the build stage's JSON (default: in the data dir's parent)")
    ap.add_argument("--drop-dependent-policies", action="store_true",
                    help="workaround: before migrating, drop the policies of other tables that depend on hybrid.chunk")
    ap.add_argument("--build-maintenance-work-mem", default="3GB", help="for the old install's build only")
    ap.add_argument("--keep", action="store_true", help="keep the server and data dir")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "migration_time.json"))
    args = ap.parse_args(argv)

    if args.stage == "build":
        stage_build(args)
        return 0
    if args.data_dir is None:
        base = Path(tempfile.mkdtemp(prefix="pyh-migtime-"))
        base.chmod(0o755)  # the server's system user must traverse it
        args.data_dir = str(base / "pg")
    base = Path(args.data_dir).parent
    args.state = args.state or str(base / "build_state.json")
    try:
        if args.stage == "all":
            env = dict(os.environ, PYTHONPATH=str(Path(args.old_tree).resolve()))
            cmd = [sys.executable, str(Path(__file__).resolve()), "--stage", "build", "--chunks", str(args.chunks),
                   "--edges", str(args.edges), "--batch", str(args.batch), "--seed", str(args.seed),
                   "--old-tree", args.old_tree, "--data-dir", args.data_dir, "--state", args.state,
                   "--build-maintenance-work-mem", args.build_maintenance_work_mem]
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, check=True)
            print(f"build stage: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        up = stage_upgrade(args)
        build = json.loads(Path(args.state).read_text())
        build.pop("probes", None)
        rep = {"args": vars(args), "engine_commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                                                                   capture_output=True, text=True).stdout.strip(),
               "machine_note": "Shared 2-core / 23 GB machine, loaded by other long benchmarks during the run.",
               "loadavg_end": os.getloadavg(), "build": build, "upgrade": up}
        if up["returncode"] == 0:
            chunks = build["before"]["tables"]["chunks"]
            rep["seconds_per_million_chunks"] = round(up["total_s"] / (chunks / 1e6), 1)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rep, indent=2) + "\n")
        out.with_suffix(".md").write_text(markdown(rep))
        print(markdown(rep))
        return 0 if up["returncode"] == 0 else 1
    finally:
        if not args.keep:
            from pyhybrid.server import stop_embedded

            try:
                stop_embedded(Path(args.data_dir))
            except Exception as e:  # noqa: BLE001
                print(f"stop_embedded: {e}", file=sys.stderr)
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
