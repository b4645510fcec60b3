"""One-off: the dense branch's breadth at the kept 1M database's 50% tenant, with the audit's wider list before the
exact scan. Per HNSW build (the load's, then REINDEX), each query through search_dense and hybrid_retrieve at each
--efs (setting hnsw_ef_search, modes in a seeded random order per query); recall@10 against exact numpy search, the
audit's outcome, a machine-speed control per build."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import psycopg

from _common import control_ms, pct, start_meta, vector_literal, write_result
from latency import APP_ROLE, Runner, dsn_for, exact_top, generate, make_queries
from pyhybrid import connect, migrate
from pyhybrid.server import start_embedded


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/pyhybrid-bench-latency"))
    ap.add_argument("--size", type=int, default=1000000)
    ap.add_argument("--tenant", default="t000")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--builds", type=int, default=3)
    ap.add_argument("--efs", type=int, nargs="+", default=[300, 450, 671])
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--out", type=Path, default=Path("bench/results/breadth_ab_dense150.json"))
    args = ap.parse_args()
    meta = start_meta("breadth_ab")
    admin = start_embedded(args.data_dir)
    db_dsn = dsn_for(admin, f"bench_latency_{args.size}")
    migrate.upgrade(db_dsn)
    world, _, _, tenants = generate(args.seed, args.size)
    td = next(t for t in tenants if t.tenant_id == args.tenant)
    del tenants
    qs = make_queries(world, td, args.queries + args.warmup, np.random.default_rng(args.seed + 99))  # not latency.py's
    exact = [exact_top(td, q, 10) for q in qs]
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        index = conn.execute("SELECT i.indexrelid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                             "JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'hnsw' AND i.indrelid = "
                             "hybrid._chunk_partition(hybrid._tenant_key(%s))", (args.tenant,)).fetchone()[0]
    builds = []
    with connect(dsn_for(admin, f"bench_latency_{args.size}", APP_ROLE)) as client, \
            psycopg.connect(db_dsn, autocommit=True) as conn:
        run = Runner(client, td.tenant_id)

        def set_ef(ef: int | None) -> None:
            conn.execute("DELETE FROM hybrid.setting WHERE key = 'hnsw_ef_search'")
            if ef is not None:
                conn.execute("INSERT INTO hybrid.setting (key, value) VALUES ('hnsw_ef_search', %s)", (str(ef),))

        def dense(q) -> tuple[float, list[str], str]:
            t0 = time.perf_counter()
            with client.connection() as c, c.transaction():
                c.execute("SELECT set_config('hybrid.tenant_id', %s, true)", (td.tenant_id,))
                ids = [r["chunk_id"] for r in c.execute("SELECT chunk_id FROM hybrid.search_dense(%s::vector, 30) ORDER BY rank",
                                                        (vector_literal(q.vector),)).fetchall()]
                audit = c.execute("SELECT current_setting('hybrid.dense_audit', true) AS a").fetchone()["a"]
            return time.perf_counter() - t0, ids, audit

        for b in range(args.builds):
            build_s = None
            if b > 0:
                t0 = time.perf_counter()
                conn.execute("SET maintenance_work_mem = '4GB'")
                conn.execute(f"REINDEX INDEX {index}")
                build_s = round(time.perf_counter() - t0, 1)
            rec: dict = {"build": b, "build_s": build_s, "control_ms_start": control_ms(),
                         "modes": {ef: {"dense_ms": [], "hybrid_ms": [], "recall": [], "audit": []} for ef in args.efs}}
            for i, q in enumerate(qs):
                for j in np.random.default_rng(1000 * b + i).permutation(len(args.efs)):
                    ef = args.efs[j]
                    set_ef(ef)
                    el, ids, audit = dense(q)
                    h = run.hybrid_retrieve(q)[0]
                    if i >= args.warmup:
                        m = rec["modes"][ef]
                        m["dense_ms"].append(round(el * 1000, 3))
                        m["hybrid_ms"].append(round(h * 1000, 3))
                        m["recall"].append(len(exact[i] & set(ids[:10])) / 10)
                        m["audit"].append(audit)
            rec["control_ms_end"] = control_ms()
            for ef, m in rec["modes"].items():
                m["summary"] = {"dense_p50": round(pct(m["dense_ms"], 50), 2), "dense_p95": round(pct(m["dense_ms"], 95), 2),
                                "dense_p99": round(pct(m["dense_ms"], 99), 2), "hybrid_p50": round(pct(m["hybrid_ms"], 50), 2),
                                "hybrid_p95": round(pct(m["hybrid_ms"], 95), 2), "hybrid_p99": round(pct(m["hybrid_ms"], 99), 2),
                                "recall_mean": round(statistics.fmean(m["recall"]), 4), "recall_min": min(m["recall"]),
                                "zero": m["recall"].count(0.0), **{a: m["audit"].count(a) for a in sorted(set(m["audit"]))}}
                print(b, build_s, ef, m["summary"], flush=True)
            builds.append(rec)
        set_ef(None)
    write_result(args.out, meta, {"index": index, "tenant": args.tenant, "efs": args.efs, "builds": builds})


if __name__ == "__main__":
    main()
