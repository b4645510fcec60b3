"""Dense branch tuning on this machine: exact-vs-HNSW crossover, ef_search and HNSW build parameters.

Vectors come from the synthetic benchmark's generator (bench/latency.py: World, make_tenant,
make_queries, seed 20240501). The large tenant is the 50% tenant of the 1M run, bit for bit: in
latency.py tenant t000 is the first make_tenant call on default_rng(seed + 1,000,000), with
tenant_sizes(1,000,000)[0] = 500,000 chunks, so it is generated alone, without the other 99 tenants.
Smaller tenants (--small-sizes) are fresh tenants of those sizes from the same World, each with its own
rng (default_rng(seed + 31 * n + 5)). All are loaded through pyhybrid (TenantSession.ingest as the app role,
inside HybridClient(admin).bulk_load(): HNSW dropped, rebuilt by hybrid.resume_vector_index() with the
product's default m 16, ef_construction 64) into a database on the embedded server.

Then, as the app role under RLS (a transaction per call: set hybrid.tenant_id, call the function), with
recall@10 against exact numpy search over the tenant's vectors:

  (a) crossover: per small tenant, hybrid.search_dense forced exact (exact_threshold => 2^31-1) and forced
      HNSW (exact_threshold => 0), interleaved query by query (the order alternates), at per-branch top_k 30
      (hybrid_retrieve's depth for top_k 10), and with fewer queries at top_k 10 and 100;
  (b) ef_search: hybrid.setting hnsw_ef_search set to each of --efs (an admin UPDATE before each call,
      untimed), interleaved query by query, at the tenants >= 10k and the 500k tenant, top_k 30 (recall on
      its top 10);
  (c) build parameters: the 500k tenant's (chunk_id, embedding) copied into a plain table, indexed with
      CREATE INDEX ... USING hnsw (embedding vector_cosine_ops) WITH (m, ef_construction) for each of
      --builds (build time, size, NOTICEs), then queried the way search_dense queries HNSW
      (hnsw.iterative_scan relaxed_order, hnsw.ef_search per --efs, ORDER BY embedding <=> q LIMIT 30)
      as the superuser on the copy (no RLS, no function): its latencies compare with each other, not with (b).

    PYTHONPATH=. python bench/dense_tuning.py --out bench/results/dense_tuning.json

Results are written after each phase (and each build); --build-deadline HH:MM (UTC) starts no build that
would not finish by then (estimated from the previous build) and caps each build with statement_timeout.

Copy on branch bench-cross (from /tmp/wt-dense's bench/dense_tuning.py, a snapshot), adapted minimally to
re-measure the crossover at 5eb8118 (embeddings in the row, STORAGE MAIN since b079546; HNSW path always
uses the index): the only change is that setup() also records, per partition, how many rows have their
embedding stored out of line (pg_column_toast_chunk_id(embedding) IS NOT NULL, PostgreSQL 17+) and how many
rows are over 2 kB (pg_column_size of the row), and the Markdown prints it. The big tenant and the other
phases are skipped with existing options (--big-size 0, --phases crossover); outputs are named by --out:

    PYTHONPATH=. python bench/dense_tuning.py --phases crossover --big-size 0 \
        --small-sizes 1000 2000 3000 5000 7500 10000 20000 --top-ks 30 10 \
        --out bench/results/dense_crossover_inline.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import latency as L  # noqa: E402  (bench/latency.py: the generator, server settings, helpers)
from pyhybrid import Chunk, connect, migrate  # noqa: E402
from pyhybrid.server import start_embedded, stop_embedded  # noqa: E402

BIG_CORPUS = 1_000_000
FORCE_EXACT = 2**31 - 1
FORCE_HNSW = 0
DENSE_SQL = "SELECT chunk_id FROM hybrid.search_dense(%s::vector, %s, NULL, NULL, %s)"
COPY_TABLE = "bench_dense_copy"
COPY_SQL = f"SELECT chunk_id FROM {COPY_TABLE} ORDER BY embedding <=> %s::vector LIMIT %s"
SET_EF = "INSERT INTO hybrid.setting (key, value) VALUES ('hnsw_ef_search', %s) " \
         "ON CONFLICT (key) DO UPDATE SET value = excluded.value"


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def summ(ms: list[float]) -> dict[str, Any]:
    return {"n": len(ms), "p50_ms": round(L.pct(ms, 50), 3), "p95_ms": round(L.pct(ms, 95), 3),
            "mean_ms": round(statistics.fmean(ms), 3) if ms else None}


def truth(td: L.TenantData, qs: list[L.Query], k: int = 10) -> list[set[str]]:
    """Exact top-k chunk ids per query (cosine; the vectors are unit length), numpy, in batches."""
    ids = np.array(td.chunk_ids, dtype=object)
    qv = np.stack([q.vector / np.linalg.norm(q.vector) for q in qs]).astype(np.float32)
    out: list[set[str]] = []
    for lo in range(0, len(qs), 32):
        sims = qv[lo:lo + 32] @ td.vectors.T
        kk = min(k, sims.shape[1])
        top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        out += [set(ids[row]) for row in top]
    return out


def recall(exact: set[str], got: list[str], k: int = 10) -> float:
    k = min(k, len(exact))
    return len(exact & set(got[:k])) / k


def rec_summ(rs: list[float]) -> dict[str, Any]:
    return {"recall_at_10_mean": round(statistics.fmean(rs), 4), "recall_at_10_min": round(min(rs), 3),
            "queries_below_0_9": sum(1 for r in rs if r < 0.9)}


# ----------------------------------------------------------------------------- load


def setup(admin_dsn: str, db: str, tenants: list[L.TenantData], batch: int) -> tuple[str, dict[str, Any]]:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (L.APP_ROLE,)).fetchone():
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(L.APP_ROLE)))
    db_dsn = L.dsn_for(admin_dsn, db)
    migrate.upgrade(db_dsn)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        for td in tenants:
            conn.execute("SELECT hybrid.create_tenant(%s)", (td.tenant_id,))
        conn.execute("SELECT hybrid.grant_app(%s)", (L.APP_ROLE,))
    app_dsn = L.dsn_for(admin_dsn, db, L.APP_ROLE)
    out: dict[str, Any] = {}
    with connect(db_dsn) as admin, connect(app_dsn) as client:
        t0 = time.perf_counter()
        with admin.bulk_load():
            for td in tenants:
                for lo, hi in L.doc_batches(td, batch):
                    chunks = [Chunk(chunk_id=td.chunk_ids[j], document_id=td.doc_ids[j], content=td.texts[j],
                                    embedding=td.vectors[j], position=int(td.positions[j]),
                                    metadata={"title": f"{td.doc_ids[j]} part {int(td.positions[j])}",
                                              "topic": int(td.clusters[j])})
                              for j in range(lo, hi)]
                    with client.tenant(td.tenant_id) as t:
                        r = t.ingest(chunks, corpus_id="main")
                    assert r.inserted == hi - lo and r.superseded == 0, r
                print(f"loaded {td.tenant_id} ({len(td.chunk_ids):,}) at {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            t1 = time.perf_counter()
            print(f"loaded in {t1 - t0:.0f} s; rebuilding HNSW (all partitions)", file=sys.stderr)
        t2 = time.perf_counter()
    out["chunks"] = sum(len(td.chunk_ids) for td in tenants)
    out["load_s"] = round(t1 - t0, 1)
    out["hnsw_rebuild_all_partitions_s"] = round(t2 - t1, 1)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        t0 = time.perf_counter()
        conn.execute("VACUUM (ANALYZE) hybrid.chunk")
        out["vacuum_analyze_s"] = round(time.perf_counter() - t0, 1)
        out["partitions"] = {}
        for td in tenants:
            row = conn.execute("""
                SELECT p::text AS part, c.reltuples, pg_relation_size(p) AS heap, pg_table_size(p) AS tbl,
                       (SELECT pg_relation_size(i.inhrelid) FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid
                        WHERE i.inhparent = 'hybrid.chunk_embedding_hnsw'::regclass AND x.indrelid = p) AS hnsw
                FROM hybrid._chunk_partition(hybrid._tenant_key(%s)) p JOIN pg_class c ON c.oid = p""",
                                 (td.tenant_id,)).fetchone()
            out["partitions"][td.tenant_id] = {"partition": row[0], "reltuples": row[1],
                                               "table_mb": round(row[3] / 2**20, 1), "hnsw_mb": round(row[4] / 2**20, 1)}
            inl = conn.execute(sql.SQL("""
                SELECT count(*), count(*) FILTER (WHERE pg_column_toast_chunk_id(embedding) IS NOT NULL),
                       count(*) FILTER (WHERE pg_column_size(t.*) > 2000), max(pg_column_size(t.*)),
                       max(pg_column_size(embedding)), string_agg(DISTINCT pg_column_compression(embedding), ',')
                FROM {} t""").format(sql.SQL(row[0]))).fetchone()
            out["partitions"][td.tenant_id]["embedding_in_row"] = {
                "rows": inl[0], "embedding_toasted": inl[1], "rows_over_2kB": inl[2], "max_row_bytes": inl[3],
                "max_embedding_bytes": inl[4], "embedding_compression": inl[5]}
    return db_dsn, out


# ----------------------------------------------------------------------------- (a) crossover


def dense_call(client: Any, tenant: str, v: str, top_k: int, thr: int) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    with client.connection() as conn, conn.transaction():
        conn.execute(L.SET_TENANT, (tenant,))
        ids = [r["chunk_id"] for r in conn.execute(DENSE_SQL, (v, top_k, thr)).fetchall()]
    return (time.perf_counter() - t0) * 1000.0, ids


def crossover(app_dsn: str, td: L.TenantData, qs: list[L.Query], warm: list[L.Query], gt: list[set[str]],
              top_ks: list[int], n_for: dict[int, int]) -> dict[str, Any]:
    out: dict[str, Any] = {"tenant_id": td.tenant_id, "chunks": len(td.chunk_ids)}
    modes = [("exact", FORCE_EXACT), ("hnsw", FORCE_HNSW)]
    with connect(app_dsn) as client:
        for q in warm:
            v = L.vector_literal(q.vector)
            for _, thr in modes:
                dense_call(client, td.tenant_id, v, 30, thr)
        for k in top_ks:
            ms: dict[str, list[float]] = {m: [] for m, _ in modes}
            rc: dict[str, list[float]] = {m: [] for m, _ in modes}
            rows: dict[str, list[int]] = {m: [] for m, _ in modes}
            for i, q in enumerate(qs[: n_for[k]]):
                v = L.vector_literal(q.vector)
                for m, thr in (modes if i % 2 == 0 else modes[::-1]):
                    el, ids = dense_call(client, td.tenant_id, v, k, thr)
                    ms[m].append(el)
                    rc[m].append(recall(gt[i], ids))
                    rows[m].append(len(ids))
            r: dict[str, Any] = {}
            for m, _ in modes:
                r[m] = {**summ(ms[m]), **rec_summ(rc[m]), "rows_min": min(rows[m])}
            r["exact_over_hnsw_p50"] = round(r["exact"]["p50_ms"] / r["hnsw"]["p50_ms"], 3)
            r["exact_over_hnsw_p95"] = round(r["exact"]["p95_ms"] / r["hnsw"]["p95_ms"], 3)
            r["exact_over_hnsw_median_paired"] = round(statistics.median(
                [a / b for a, b in zip(ms["exact"], ms["hnsw"])]), 3)
            r["exact_faster_share"] = round(sum(a < b for a, b in zip(ms["exact"], ms["hnsw"])) / len(ms["exact"]), 3)
            r["_raw_ms"] = {m: [round(x, 3) for x in ms[m]] for m, _ in modes}
            out[f"top_k_{k}"] = r
            print(f"(a) {len(td.chunk_ids)} top_k {k}: exact p50 {r['exact']['p50_ms']:.2f} hnsw p50 "
                  f"{r['hnsw']['p50_ms']:.2f} ratio {r['exact_over_hnsw_p50']:.2f}; hnsw recall "
                  f"{r['hnsw']['recall_at_10_mean']:.3f}", file=sys.stderr)
    return out


def crossover_estimate(runs: list[dict[str, Any]], key: str, stat: str) -> str:
    """Where exact/HNSW crosses 1 (log-log interpolation between the measured sizes), as text."""
    pts = sorted((r["chunks"], r[key][stat]) for r in runs if key in r)
    if not pts:
        return "n/a"
    cross = []
    for (n0, r0), (n1, r1) in zip(pts, pts[1:]):
        if (r0 <= 1.0) != (r1 <= 1.0):
            t = (0 - math.log(r0)) / (math.log(r1) - math.log(r0))
            cross.append(f"~{math.exp(math.log(n0) + t * (math.log(n1) - math.log(n0))):,.0f}")
    if cross:
        return ", ".join(cross)
    return (f"exact slower at every size measured (from {pts[0][0]:,})" if pts[0][1] > 1.0
            else f"exact faster at every size measured (up to {pts[-1][0]:,})")


DIRECT_SQL = {
    # the statements of search_dense's two paths, sent directly as the app role (RLS applies), so that the
    # HNSW index scan can be forced where the planner would sort the partition instead (enable_seqscan off)
    "direct_exact": "SELECT chunk_id FROM hybrid.chunk c WHERE c.tenant_key = %s AND NOT c.superseded "
                    "AND c.embedding IS NOT NULL ORDER BY (c.embedding <=> %s::vector) + 0, c.chunk_id LIMIT %s",
    "direct_hnsw": "SELECT chunk_id FROM hybrid.chunk c WHERE c.tenant_key = %s AND NOT c.superseded "
                   "ORDER BY c.embedding <=> %s::vector LIMIT %s",
}


def direct_call(client: Any, tenant: str, key: int, v: str, top_k: int, method: str) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    with client.connection() as conn, conn.transaction():
        conn.execute(L.SET_TENANT, (tenant,))
        if method == "direct_hnsw":
            conn.execute("SELECT set_config('hnsw.ef_search', '100', true), "
                         "set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('enable_seqscan', 'off', true)")
        ids = [r["chunk_id"] for r in conn.execute(DIRECT_SQL[method], (key, v, top_k)).fetchall()]
    return (time.perf_counter() - t0) * 1000.0, ids


def hnsw_plan(db_dsn: str, td: L.TenantData, v: str, top_k: int, force: bool) -> str:
    """The plan of search_dense's HNSW-path statement for this tenant (as the function's owner, under RLS)."""
    with psycopg.connect(db_dsn, autocommit=True) as c:
        key = c.execute("SELECT hybrid._tenant_key(%s)", (td.tenant_id,)).fetchone()[0]
        own = c.execute("SELECT proowner::regrole::text FROM pg_proc WHERE oid = 'hybrid.search_dense'::regproc").fetchone()[0]
        c.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(own)))
        with c.transaction():
            c.execute(L.SET_TENANT, (td.tenant_id,))
            if force:
                c.execute("SET LOCAL enable_seqscan = off")
            acl, al = c.execute("SELECT hybrid._current_acl(), hybrid._acl_all()").fetchone()
            plan = c.execute("""EXPLAIN (COSTS OFF) SELECT c.chunk_id, (c.embedding <=> %s::vector)::double precision AS d
              FROM hybrid.chunk c WHERE c.tenant_key = %s AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, %s, %s, %s)
              ORDER BY c.embedding <=> %s::vector LIMIT %s""", (v, key, td.tenant_id, acl, al, v, top_k)).fetchall()
    return plan_kind(" ".join(r[0] for r in plan))


def plan_kind(text: str) -> str:
    if "embedding_idx" in text:
        return "HNSW index scan"
    if "Seq Scan" in text:
        return "seq scan + sort"
    if "Sort" in text:
        return "other scan + sort (not HNSW)"
    return text[:200]


def crossover_direct(db_dsn: str, app_dsn: str, td: L.TenantData, qs: list[L.Query], warm: list[L.Query],
                     gt: list[set[str]], top_k: int) -> dict[str, Any]:
    with psycopg.connect(db_dsn) as c:
        key = c.execute("SELECT hybrid._tenant_key(%s)", (td.tenant_id,)).fetchone()[0]
    v0 = L.vector_literal(qs[0].vector)
    out: dict[str, Any] = {"tenant_id": td.tenant_id, "chunks": len(td.chunk_ids), "top_k": top_k,
                           "search_dense_hnsw_path_plan": hnsw_plan(db_dsn, td, v0, top_k, False),
                           "direct_hnsw_plan": hnsw_plan(db_dsn, td, v0, top_k, True)}
    methods = ["fn_exact", "fn_hnsw", "direct_exact", "direct_hnsw"]
    ms: dict[str, list[float]] = {m: [] for m in methods}
    rc: dict[str, list[float]] = {m: [] for m in methods}

    def call(client: Any, m: str, v: str) -> tuple[float, list[str]]:
        if m.startswith("fn_"):
            return dense_call(client, td.tenant_id, v, top_k, FORCE_EXACT if m == "fn_exact" else FORCE_HNSW)
        return direct_call(client, td.tenant_id, key, v, top_k, m)

    with connect(app_dsn) as client:
        for q in warm:
            for m in methods:
                call(client, m, L.vector_literal(q.vector))
        for i, q in enumerate(qs):
            v = L.vector_literal(q.vector)
            for m in methods[i % 4:] + methods[: i % 4]:
                el, ids = call(client, m, v)
                ms[m].append(el)
                rc[m].append(recall(gt[i], ids))
    for m in methods:
        out[m] = {**summ(ms[m]), **rec_summ(rc[m])}
    out["fn_exact_over_fn_hnsw_p50"] = round(out["fn_exact"]["p50_ms"] / out["fn_hnsw"]["p50_ms"], 3)
    out["direct_exact_over_direct_hnsw_p50"] = round(out["direct_exact"]["p50_ms"] / out["direct_hnsw"]["p50_ms"], 3)
    out["direct_exact_over_direct_hnsw_p95"] = round(out["direct_exact"]["p95_ms"] / out["direct_hnsw"]["p95_ms"], 3)
    out["direct_exact_over_direct_hnsw_median_paired"] = round(statistics.median(
        [a / b for a, b in zip(ms["direct_exact"], ms["direct_hnsw"])]), 3)
    print(f"(a') {len(td.chunk_ids)} top_k {top_k}: fn exact {out['fn_exact']['p50_ms']:.2f} fn hnsw "
          f"{out['fn_hnsw']['p50_ms']:.2f} ({out['search_dense_hnsw_path_plan']}); direct exact "
          f"{out['direct_exact']['p50_ms']:.2f} direct hnsw {out['direct_hnsw']['p50_ms']:.2f} ({out['direct_hnsw_plan']}) "
          f"recall {out['direct_hnsw']['recall_at_10_mean']:.3f}", file=sys.stderr)
    return out


# ----------------------------------------------------------------------------- (b) ef_search


def ef_sweep(db_dsn: str, app_dsn: str, td: L.TenantData, qs: list[L.Query], warm: list[L.Query],
             gt: list[set[str]], efs: list[int], top_k: int) -> dict[str, Any]:
    ms: dict[int, list[float]] = {e: [] for e in efs}
    rc: dict[int, list[float]] = {e: [] for e in efs}
    rows: dict[int, list[int]] = {e: [] for e in efs}
    with psycopg.connect(db_dsn, autocommit=True) as admin, connect(app_dsn) as client:
        for q in warm:
            v = L.vector_literal(q.vector)
            for e in efs:
                admin.execute(SET_EF, (str(e),))
                dense_call(client, td.tenant_id, v, top_k, FORCE_HNSW)
        for i, q in enumerate(qs):
            v = L.vector_literal(q.vector)
            order = efs[i % len(efs):] + efs[: i % len(efs)]
            for e in order:
                admin.execute(SET_EF, (str(e),))  # committed before the call, not timed
                el, ids = dense_call(client, td.tenant_id, v, top_k, FORCE_HNSW)
                ms[e].append(el)
                rc[e].append(recall(gt[i], ids))
                rows[e].append(len(ids))
        admin.execute("DELETE FROM hybrid.setting WHERE key = 'hnsw_ef_search'")
    base = efs[0]
    out: dict[str, Any] = {"tenant_id": td.tenant_id, "chunks": len(td.chunk_ids), "top_k": top_k, "by_ef": {}}
    for e in efs:
        s = {**summ(ms[e]), **rec_summ(rc[e]), "rows_min": min(rows[e])}
        s[f"p50_over_ef{base}"] = round(s["p50_ms"] / L.pct(ms[base], 50), 3)
        s[f"p95_over_ef{base}"] = round(s["p95_ms"] / L.pct(ms[base], 95), 3)
        out["by_ef"][str(e)] = s
        print(f"(b) {len(td.chunk_ids)} ef {e}: recall {s['recall_at_10_mean']:.4f} p50 {s['p50_ms']:.2f} "
              f"p95 {s['p95_ms']:.2f}", file=sys.stderr)
    return out


# ----------------------------------------------------------------------------- (c) builds


def copy_query(conn: psycopg.Connection[Any], v: str, ef: int, top_k: int) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    with conn.transaction():
        conn.execute("SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)",
                     (str(ef),))
        ids = [r[0] for r in conn.execute(COPY_SQL, (v, top_k)).fetchall()]
    return (time.perf_counter() - t0) * 1000.0, ids


def builds(db_dsn: str, td: L.TenantData, qs: list[L.Query], warm: list[L.Query], gt: list[set[str]],
           efs: list[int], top_k: int, specs: list[tuple[int, int]], deadline: dt.datetime | None,
           report: dict[str, Any], save: Any) -> None:
    res = report.setdefault("builds", {"table": COPY_TABLE, "runs": []})
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        if not conn.execute("SELECT to_regclass(%s) IS NOT NULL", (COPY_TABLE,)).fetchone()[0]:
            t0 = time.perf_counter()
            conn.execute(f"CREATE TABLE {COPY_TABLE} AS SELECT chunk_id, embedding FROM hybrid.chunk "
                         "WHERE tenant_id = %s AND NOT superseded", (td.tenant_id,))
            conn.execute(f"VACUUM (ANALYZE) {COPY_TABLE}")
            res["copy_s"] = round(time.perf_counter() - t0, 1)
            res["rows"] = conn.execute(f"SELECT count(*) FROM {COPY_TABLE}").fetchone()[0]
            res["table_mb"] = round(conn.execute(f"SELECT pg_table_size('{COPY_TABLE}')").fetchone()[0] / 2**20, 1)
        last: tuple[int, int, float] | None = None
        for m, efc in specs:
            name = f"bench_dense_hnsw_m{m}_efc{efc}"
            entry: dict[str, Any] = {"m": m, "ef_construction": efc}
            if deadline is not None:
                left = (deadline - now_utc()).total_seconds()
                est = last[2] * (m * efc) / (last[0] * last[1]) if last else None
                entry["estimated_build_s"] = round(est, 0) if est else None
                if left <= 60 or (est is not None and est > left):
                    entry["skipped"] = f"not started: {left:.0f} s to the deadline, estimated build {est or 0:.0f} s"
                    res["runs"].append(entry)
                    save()
                    print(f"(c) m {m} efc {efc}: {entry['skipped']}", file=sys.stderr)
                    continue
            conn.execute("SET maintenance_work_mem = '1GB'")
            if deadline is not None:
                conn.execute(sql.SQL("SET statement_timeout = {}").format(
                    sql.Literal(f"{max(60, int((deadline - now_utc()).total_seconds()))}s")))
            for (om, oefc) in specs:
                conn.execute(f"DROP INDEX IF EXISTS bench_dense_hnsw_m{om}_efc{oefc}")
            notices: list[str] = []

            def on_notice(d: Any, notices: list[str] = notices) -> None:
                notices.append(d.message_primary)

            conn.add_notice_handler(on_notice)
            print(f"(c) building m {m} efc {efc} at {now_utc():%H:%M:%S}", file=sys.stderr)
            t0 = time.perf_counter()
            try:
                conn.execute(f"CREATE INDEX {name} ON {COPY_TABLE} USING hnsw (embedding vector_cosine_ops) "
                             f"WITH (m = {m}, ef_construction = {efc})")
            except psycopg.errors.QueryCanceled:
                entry["failed"] = f"CREATE INDEX cancelled by statement_timeout after {time.perf_counter() - t0:.0f} s"
                entry["notices"] = notices
                res["runs"].append(entry)
                save()
                conn.execute("RESET statement_timeout")
                continue
            finally:
                conn.remove_notice_handler(on_notice)
            entry["build_s"] = round(time.perf_counter() - t0, 1)
            conn.execute("RESET statement_timeout")
            entry["index_mb"] = round(conn.execute("SELECT pg_relation_size(%s::regclass)", (name,)).fetchone()[0] / 2**20, 1)
            entry["notices"] = notices
            entry["maintenance_work_mem"] = conn.execute("SHOW maintenance_work_mem").fetchone()[0]
            entry["max_parallel_maintenance_workers"] = conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0]
            last = (m, efc, entry["build_s"])
            print(f"(c) m {m} efc {efc}: built in {entry['build_s']} s, {entry['index_mb']} MB", file=sys.stderr)
            plan = conn.execute("EXPLAIN " + COPY_SQL.replace("%s::vector", "'" + L.vector_literal(qs[0].vector) + "'::vector")
                                .replace("%s", str(top_k))).fetchall()
            entry["plan_uses_index"] = any(name in r[0] for r in plan)
            ms: dict[int, list[float]] = {e: [] for e in efs}
            rc: dict[int, list[float]] = {e: [] for e in efs}
            for q in warm:
                for e in efs:
                    copy_query(conn, L.vector_literal(q.vector), e, top_k)
            for i, q in enumerate(qs):
                v = L.vector_literal(q.vector)
                for e in efs[i % len(efs):] + efs[: i % len(efs)]:
                    el, ids = copy_query(conn, v, e, top_k)
                    ms[e].append(el)
                    rc[e].append(recall(gt[i], ids))
            entry["by_ef"] = {}
            for e in efs:
                s = {**summ(ms[e]), **rec_summ(rc[e])}
                entry["by_ef"][str(e)] = s
                print(f"(c) m {m} efc {efc} ef {e}: recall {s['recall_at_10_mean']:.4f} p50 {s['p50_ms']:.2f} "
                      f"p95 {s['p95_ms']:.2f}", file=sys.stderr)
            res["runs"].append(entry)
            save()
        for (om, oefc) in specs:
            conn.execute(f"DROP INDEX IF EXISTS bench_dense_hnsw_m{om}_efc{oefc}")


# ----------------------------------------------------------------------------- report


def markdown(rep: dict[str, Any]) -> str:
    c = rep["config"]
    lines = ["# Dense branch tuning: exact vs HNSW crossover, ef_search, HNSW build parameters", "",
             f"`{rep['command']}`", "",
             f"{rep['machine']['date']}, {rep['machine']['nproc']} cores ({rep['machine']['cpu_model']}), "
             f"{rep['machine']['memory_gb']} GB, {rep['machine']['postgres'].split(' on ')[0]}, "
             f"pgvector {rep.get('versions', {}).get('vector', '?')}. Server settings: "
             + ", ".join(f"{k} {v}" for k, v in c["server_settings"].items())
             + " (latency.py's SERVER_SETTINGS with shared_buffers lowered to 1GB). The machine was shared with "
             "other benchmarks: methods are interleaved query by query, compare ratios. Load average at start "
             f"{rep['machine']['loadavg_start']}, at end {rep.get('loadavg_end')}.", ""]
    if rep.get("note"):
        lines += [rep["note"], ""]
    ld = rep.get("load")
    if ld:
        lines += [f"Loaded {ld['chunks']:,} chunks through TenantSession.ingest inside bulk_load(): load {ld['load_s']} s, "
                  f"HNSW rebuild of every partition (m 16, ef_construction 64) {ld['hnsw_rebuild_all_partitions_s']} s. "
                  "Partitions: " + ", ".join(f"{k} {v['reltuples']:,.0f} rows (HNSW {v['hnsw_mb']} MB)"
                                             for k, v in ld["partitions"].items()) + ".", ""]
        lines += ["Embeddings out of line (pg_column_toast_chunk_id(embedding) IS NOT NULL), all rows per partition: "
                  + ", ".join(f"{k} {v['embedding_in_row']['embedding_toasted']} of {v['embedding_in_row']['rows']:,} "
                              f"({v['embedding_in_row']['rows_over_2kB']:,} rows over 2 kB, largest row "
                              f"{v['embedding_in_row']['max_row_bytes']:,} B, embedding {v['embedding_in_row']['max_embedding_bytes']:,} B)"
                              for k, v in ld["partitions"].items() if "embedding_in_row" in v) + ".", ""]
    a = rep.get("crossover")
    if a:
        lines += ["## (a) Exact scan vs HNSW (ef_search 100), search_dense as the app role under RLS", "",
                  f"{c['queries']} queries per size at top_k 30 (fewer at 10 and 100, see n), after {c['warmup']} warm-up "
                  "queries; exact and HNSW alternate query by query. Recall@10 against numpy exact search. "
                  "ratio = exact / HNSW (below 1: exact faster); paired = median over queries of exact/HNSW; "
                  "ef_search is max(100, 2 x top_k): 200 at top_k 100.", ""]
        for k in c["top_ks"]:
            lines += [f"### top_k {k}", "",
                      "| chunks | n | exact p50 | exact p95 | HNSW p50 | HNSW p95 | ratio p50 | ratio p95 | paired | exact faster | HNSW recall@10 | exact recall@10 |",
                      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for r in a["runs"]:
                x = r.get(f"top_k_{k}")
                if not x:
                    continue
                lines.append(f"| {r['chunks']:,} | {x['exact']['n']} | {x['exact']['p50_ms']:.2f} | {x['exact']['p95_ms']:.2f} | "
                             f"{x['hnsw']['p50_ms']:.2f} | {x['hnsw']['p95_ms']:.2f} | {x['exact_over_hnsw_p50']:.2f} | "
                             f"{x['exact_over_hnsw_p95']:.2f} | {x['exact_over_hnsw_median_paired']:.2f} | "
                             f"{x['exact_faster_share']:.0%} | {x['hnsw']['recall_at_10_mean']:.4f} | "
                             f"{x['exact']['recall_at_10_mean']:.4f} |")
            est = a.get("crossover_estimates", {}).get(str(k))
            if est:
                lines += ["", f"Where exact/HNSW crosses 1 (log-log interpolation between measured sizes): p50 {est['p50']}; "
                              f"p95 {est['p95']}; paired {est['paired']}.", ""]
            else:
                lines.append("")
    d = rep.get("crossover_direct")
    if d:
        lines += ["## (a') Exact scan vs a forced HNSW index scan, statements sent directly as the app role under RLS", "",
                  "search_dense's HNSW path is planned by PostgreSQL, which sorts a small partition instead of using "
                  "the index (column 'search_dense HNSW path plan'). To time a real index scan there, the same two "
                  "statements are also sent directly (RLS applies; the HNSW one with hnsw.ef_search 100, iterative_scan "
                  "relaxed_order and enable_seqscan off). Four methods interleaved query by query. "
                  "ratio = exact / HNSW p50.", "",
                  "| chunks | top_k | n | fn exact p50 | fn HNSW-path p50 | its plan | direct exact p50 / p95 | direct HNSW p50 / p95 | direct ratio p50 | p95 | paired | direct HNSW recall@10 (its plan) |",
                  "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
        for r in d["runs"]:
            lines.append(f"| {r['chunks']:,} | {r['top_k']} | {r['fn_exact']['n']} | {r['fn_exact']['p50_ms']:.2f} | "
                         f"{r['fn_hnsw']['p50_ms']:.2f} | {plan_kind(r['search_dense_hnsw_path_plan'])} | "
                         f"{r['direct_exact']['p50_ms']:.2f} / {r['direct_exact']['p95_ms']:.2f} | "
                         f"{r['direct_hnsw']['p50_ms']:.2f} / {r['direct_hnsw']['p95_ms']:.2f} | "
                         f"{r['direct_exact_over_direct_hnsw_p50']:.2f} | {r['direct_exact_over_direct_hnsw_p95']:.2f} | "
                         f"{r['direct_exact_over_direct_hnsw_median_paired']:.2f} | {r['direct_hnsw']['recall_at_10_mean']:.4f} "
                         f"({plan_kind(r['direct_hnsw_plan'])}) |")
        lines.append("")
    b = rep.get("ef_search")
    if b:
        lines += ["## (b) Recall@10 and latency vs hnsw_ef_search (product index m 16, ef_construction 64), search_dense under RLS", "",
                  "top_k 30 (recall on its top 10); ef values interleaved query by query; the setting is changed by an "
                  "untimed admin UPDATE before each call. Ratios against the first ef.", ""]
        for r in b["runs"]:
            lines += [f"### {r['chunks']:,} chunks ({r['tenant_id']}), {next(iter(r['by_ef'].values()))['n']} queries", "",
                      "| ef_search | recall@10 | min | queries < 0.9 | p50 ms | p95 ms | p50 ratio | p95 ratio |",
                      "|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for e, s in r["by_ef"].items():
                ks = [k for k in s if k.startswith("p50_over")][0]
                kp = [k for k in s if k.startswith("p95_over")][0]
                lines.append(f"| {e} | {s['recall_at_10_mean']:.4f} | {s['recall_at_10_min']:.1f} | {s['queries_below_0_9']} | "
                             f"{s['p50_ms']:.2f} | {s['p95_ms']:.2f} | {s[ks]:.2f} | {s[kp]:.2f} |")
            lines.append("")
    cc = rep.get("builds")
    if cc:
        lines += ["## (c) HNSW build parameters, on a plain-table copy of the 500k tenant's vectors", "",
                  f"{cc.get('rows', '?'):,} rows copied into `{cc['table']}` ({cc.get('table_mb')} MB); each index built alone "
                  "(maintenance_work_mem 1GB), queried as the superuser without RLS or the function, "
                  "hnsw.iterative_scan relaxed_order, ORDER BY embedding <=> q LIMIT 30, recall on the top 10. "
                  "Latencies compare across builds here, not with (b).", "",
                  "| m | ef_construction | build s | index MB | notices |", "|---:|---:|---:|---:|---|"]
        for r in cc["runs"]:
            if "build_s" in r:
                lines.append(f"| {r['m']} | {r['ef_construction']} | {r['build_s']} | {r['index_mb']} | {'; '.join(r['notices']) or '-'} |")
            else:
                lines.append(f"| {r['m']} | {r['ef_construction']} | - | - | {r.get('skipped') or r.get('failed')} |")
        built = [r for r in cc["runs"] if "by_ef" in r]
        if built:
            efs = list(built[0]["by_ef"])
            lines += ["", "Recall@10 / p50 ms / p95 ms by ef_search:", "",
                      "| m, ef_construction | " + " | ".join(f"ef {e}" for e in efs) + " |",
                      "|---|" + "---:|" * len(efs)]
            for r in built:
                lines.append(f"| {r['m']}, {r['ef_construction']} | " + " | ".join(
                    f"{r['by_ef'][e]['recall_at_10_mean']:.4f} / {r['by_ef'][e]['p50_ms']:.2f} / {r['by_ef'][e]['p95_ms']:.2f}"
                    for e in efs) + " |")
        lines.append("")
    for f in rep.get("failed", []):
        lines += [f"Failed: {f}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--small-sizes", type=int, nargs="*", default=[1000, 2000, 5000, 10000, 20000, 50000, 100000])
    ap.add_argument("--queries", type=int, default=200, help="(a) and (b) queries per tenant at top_k 30")
    ap.add_argument("--other-top-k-queries", type=int, default=100, help="(a) queries at top_k 10 and 100")
    ap.add_argument("--big-queries", type=int, default=300, help="(b) and (c) queries at the 500k tenant")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--top-ks", type=int, nargs="+", default=[30, 10, 100])
    ap.add_argument("--efs", type=int, nargs="+", default=[100, 200, 300, 400, 600, 800, 1000])
    ap.add_argument("--ef-min-size", type=int, default=10000, help="(b) also at the small tenants of at least this size")
    ap.add_argument("--builds", nargs="*", default=["16,128", "16,64", "24,128", "32,128", "32,200"],
                    help="(c) m,ef_construction pairs, in order")
    ap.add_argument("--build-deadline", default=None, help="HH:MM UTC: start no build that would end later")
    ap.add_argument("--phases", nargs="+", default=["crossover", "ef", "builds"])
    ap.add_argument("--batch", type=int, default=10000)
    ap.add_argument("--big-size", type=int, default=None, help="smoke tests only: the big tenant's size (default "
                    "tenant_sizes(1,000,000)[0], the 1M run's 50%% tenant; another size is another tenant)")
    ap.add_argument("--shared-buffers", default="1GB")
    ap.add_argument("--out", type=Path, default=Path("bench/results/dense_tuning.json"))
    ap.add_argument("--note", default=None, help="a line for the summary (e.g. what else ran meanwhile)")
    ap.add_argument("--keep", action="store_true", help="leave the server running and its data dir in place")
    args = ap.parse_args(argv)

    t_all = time.perf_counter()
    deadline = None
    if args.build_deadline:
        hh, mm = map(int, args.build_deadline.split(":"))
        deadline = now_utc().replace(hour=hh, minute=mm, second=0, microsecond=0)
    L.SERVER_SETTINGS["shared_buffers"] = args.shared_buffers
    base = Path(tempfile.mkdtemp(prefix="pyh-dense-", dir="/tmp"))
    base.chmod(0o755)  # the server's user (pgserver) must traverse it
    data_dir = base / "data"
    print(f"data dir {data_dir}", file=sys.stderr)
    admin_dsn = start_embedded(data_dir)
    admin_dsn = L.configure_server(data_dir, admin_dsn)
    specs = [tuple(map(int, s.split(","))) for s in args.builds]
    rep: dict[str, Any] = {
        "command": (f"PYTHONPATH={os.environ['PYTHONPATH']} " if os.environ.get("PYTHONPATH") else "") + "python "
                   + " ".join([os.path.relpath(__file__, Path.cwd()), *(argv if argv is not None else sys.argv[1:])]),
        "machine": L.machine_info(admin_dsn),
        "engine": L.engine_state(),
        "config": {"seed": args.seed, "big_tenant": f"t000 of tenant_sizes({BIG_CORPUS}) (rng seed + {BIG_CORPUS})",
                   "small_sizes": args.small_sizes, "queries": args.queries, "other_top_k_queries": args.other_top_k_queries,
                   "big_queries": args.big_queries, "warmup": args.warmup, "top_ks": args.top_ks, "efs": args.efs,
                   "builds": args.builds, "server_settings": dict(L.SERVER_SETTINGS)},
    }
    if args.note:
        rep["note"] = args.note
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        rep["wall_s"] = round(time.perf_counter() - t_all, 1)
        rep["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        args.out.write_text(json.dumps(rep, indent=1))
        args.out.with_suffix(".md").write_text(markdown(rep))

    try:
        t0 = time.perf_counter()
        world = L.World(args.seed)
        sizes = L.tenant_sizes(BIG_CORPUS)
        big = L.make_tenant(world, "t000", args.big_size or sizes[0], np.random.default_rng(args.seed + BIG_CORPUS)) \
            if args.big_size != 0 else None
        smalls = [L.make_tenant(world, f"s{n:06d}", n, np.random.default_rng(args.seed + 31 * n + 5))
                  for n in args.small_sizes]
        rep["generate_s"] = round(time.perf_counter() - t0, 1)
        print(f"generated in {rep['generate_s']} s", file=sys.stderr)
        if args.big_size == 0:
            big = None
        db_dsn, rep["load"] = setup(admin_dsn, "bench_dense", smalls + ([big] if big else []), args.batch)
        rep["versions"] = L.installed_versions(db_dsn)
        app_dsn = L.dsn_for(admin_dsn, "bench_dense", L.APP_ROLE)
        save()

        # queries and ground truth (same queries in every phase)
        qsets: dict[str, tuple[list[L.Query], list[L.Query], list[set[str]]]] = {}
        for td in smalls + ([big] if big else []):
            n = args.big_queries if td is big else args.queries
            qs = L.make_queries(world, td, args.warmup + n, np.random.default_rng(args.seed + 7 * len(td.chunk_ids) + 2))
            qsets[td.tenant_id] = (qs[args.warmup:], qs[: args.warmup], truth(td, qs[args.warmup:]))

        if "crossover" in args.phases:
            rep["crossover"] = {"runs": []}
            n_for = {k: (args.queries if k == 30 else args.other_top_k_queries) for k in args.top_ks}
            for td in smalls:
                qs, warm, gt = qsets[td.tenant_id]
                rep["crossover"]["runs"].append(crossover(app_dsn, td, qs, warm, gt, args.top_ks, n_for))
                rep["crossover"]["crossover_estimates"] = {
                    str(k): {"p50": crossover_estimate(rep["crossover"]["runs"], f"top_k_{k}", "exact_over_hnsw_p50"),
                             "p95": crossover_estimate(rep["crossover"]["runs"], f"top_k_{k}", "exact_over_hnsw_p95"),
                             "paired": crossover_estimate(rep["crossover"]["runs"], f"top_k_{k}", "exact_over_hnsw_median_paired")}
                    for k in args.top_ks}
                save()

        if "direct" in args.phases:
            rep["crossover_direct"] = {"runs": []}
            for td in smalls:
                qs, warm, gt = qsets[td.tenant_id]
                for k in args.top_ks:
                    rep["crossover_direct"]["runs"].append(crossover_direct(db_dsn, app_dsn, td, qs, warm, gt, k))
                    save()

        if "ef" in args.phases:
            rep["ef_search"] = {"runs": []}
            for td in [t for t in smalls if len(t.chunk_ids) >= args.ef_min_size] + ([big] if big else []):
                qs, warm, gt = qsets[td.tenant_id]
                rep["ef_search"]["runs"].append(ef_sweep(db_dsn, app_dsn, td, qs, warm, gt, args.efs, 30))
                save()

        if "builds" in args.phases and big:
            qs, warm, gt = qsets[big.tenant_id]
            builds(db_dsn, big, qs, warm[:5], gt, args.efs, 30, specs, deadline, rep, save)
            save()
    except Exception as exc:
        traceback.print_exc()
        rep.setdefault("failed", []).append(f"{type(exc).__name__}: {exc}")
        save()
    finally:
        save()
        if not args.keep:
            stop_embedded(data_dir)
            shutil.rmtree(base, ignore_errors=True)
            print(f"stopped the server, removed {base}", file=sys.stderr)
    print(args.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
