"""HNSW against IVFFlat per partition size, on a kept 1M database (`latency.py --keep-db`).

For each tenant measured (default: the 50% tenant and those nearest 10% and 2.5%), its live chunks are copied into a
table of their own (chunk_id, embedding), and on that copy, one index at a time:
  - HNSW as the engine builds it for that many rows (hybrid._hnsw_density), searched at the ef_search the
    engine's rule gives (hybrid._dense_plan: 100 x sqrt(rows / 11,111) between 100 and 300, at most 150 on the
    (24, 128) graph), one build;
  - IVFFlat as the engine builds it (hybrid._ivfflat_lists: ceil(sqrt(2 x rows)) lists), searched at --probes
    lists, over --builds builds (pgvector samples the rows its k-means starts from, so builds differ).
Each build: wall seconds, core-seconds (/proc/stat busy over both cores), index size, and the rate of single-row
inserts into it (online ingest's cost in the index; --inserts rows, rolled back). Each search setting: the
tenant's --queries queries (latency.py's own, with their exact top 10 from the generator's vectors) run once to
warm the index, then timed: p50 / p95 ms, recall@10 (mean, min, queries at 0). The statement alone: no RLS, no
audit (the engine's audit widens a list it proves wrong). A machine-speed control (ms) before and after.

    python bench/ivfflat_ab.py --data-dir /work/bench1m/data --out bench/results/ivfflat_ab_1m.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency as L  # noqa: E402
from _common import cpu_seconds, start_meta, write_result  # noqa: E402
from pyhybrid.server import start_embedded  # noqa: E402


def busy_since(before: tuple[float, float]) -> float:
    total, idle = cpu_seconds()
    return round((total - before[0]) - (idle - before[1]), 1)


def timed_build(conn: psycopg.Connection[Any], sql: str) -> dict[str, float]:
    t0, c0 = time.perf_counter(), cpu_seconds()
    conn.execute(sql)
    return {"s": round(time.perf_counter() - t0, 1), "core_s": busy_since(c0)}


def search(conn: psycopg.Connection[Any], table: str, queries: list[L.Query], exact: list[set[str]]) -> dict[str, Any]:
    sql = f"SELECT chunk_id FROM {table} ORDER BY embedding <=> %s LIMIT 10"
    for q in queries:  # warm
        conn.execute(sql, (q.vector,)).fetchall()
    ms, rec = [], []
    for q, e in zip(queries, exact):
        t0 = time.perf_counter()
        ids = [r[0] for r in conn.execute(sql, (q.vector,)).fetchall()]
        ms.append((time.perf_counter() - t0) * 1000)
        rec.append(len(set(ids) & e) / 10)
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2), "p95_ms": round(float(np.percentile(ms, 95)), 2),
            "recall_at_10": round(statistics.fmean(rec), 4), "min": min(rec), "at_0": sum(r == 0 for r in rec)}


def insert_rate(conn: psycopg.Connection[Any], table: str, n: int) -> float:
    """Rows a second inserted one statement each into table with its index (copies of its first rows' vectors,
    rolled back)."""
    vecs = [r[0] for r in conn.execute(f"SELECT embedding FROM {table} LIMIT %s", (n,)).fetchall()]
    with conn.transaction(force_rollback=True):
        t0 = time.perf_counter()
        for i, v in enumerate(vecs):
            conn.execute(f"INSERT INTO {table} (chunk_id, embedding) VALUES (%s, %s)", (f"ins{i}", v))
        return round(len(vecs) / (time.perf_counter() - t0), 1)


def measure(conn: psycopg.Connection[Any], td: L.TenantData, queries: list[L.Query], args: argparse.Namespace) -> dict[str, Any]:
    part = conn.execute("SELECT hybrid._chunk_partition(hybrid._tenant_key(%s))::text", (td.tenant_id,)).fetchone()[0]
    table = f"bench_ivf.{part.split('.')[-1]}"
    conn.execute("CREATE SCHEMA IF NOT EXISTS bench_ivf")
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} AS SELECT chunk_id, embedding FROM {part} WHERE NOT superseded")
    conn.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE MAIN")
    conn.execute(f"VACUUM ANALYZE {table}")
    rows = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    exact = [L.exact_top(td, q, 10) for q in queries]
    m, efc = conn.execute("SELECT m, ef_construction FROM hybrid._hnsw_density(%s)", (rows,)).fetchone()
    ef = min(300, max(100, round(100 * (rows / 11111.0) ** 0.5)))
    if (m, efc) == (24, 128):
        ef = min(ef, 150)
    lists = int(np.ceil(np.sqrt(2 * rows)))
    out: dict[str, Any] = {"tenant": td.tenant_id, "partition": part, "rows": rows, "hnsw": {}, "ivfflat": []}
    conn.execute("SET maintenance_work_mem = '4GB'")
    conn.execute("SET enable_seqscan = off")
    conn.execute("SET enable_sort = off")
    print(f"{td.tenant_id}: {rows} rows, HNSW m {m} ef_construction {efc}", flush=True)
    build = timed_build(conn, f"CREATE INDEX bench_ivf_hnsw ON {table} USING hnsw (embedding vector_cosine_ops) "
                              f"WITH (m = {m}, ef_construction = {efc})")
    conn.execute(f"SET hnsw.ef_search = {ef}")
    out["hnsw"] = {"m": m, "ef_construction": efc, "ef_search": ef, "build": build,
                   "mb": round(conn.execute("SELECT pg_relation_size('bench_ivf.bench_ivf_hnsw')").fetchone()[0] / 2**20, 1),
                   "search": search(conn, table, queries, exact), "insert_rows_per_s": insert_rate(conn, table, args.inserts)}
    print(f"  hnsw: {out['hnsw']}", flush=True)
    conn.execute("DROP INDEX bench_ivf.bench_ivf_hnsw")
    for b in range(args.builds):
        build = timed_build(conn, f"CREATE INDEX bench_ivf_ivf ON {table} USING ivfflat (embedding vector_cosine_ops) "
                                  f"WITH (lists = {lists})")
        entry = {"build_no": b + 1, "lists": lists, "build": build,
                 "mb": round(conn.execute("SELECT pg_relation_size('bench_ivf.bench_ivf_ivf')").fetchone()[0] / 2**20, 1),
                 "probes": {}}
        for p in args.probes:
            conn.execute(f"SET ivfflat.probes = {p}")
            entry["probes"][str(p)] = search(conn, table, queries, exact)
        entry["insert_rows_per_s"] = insert_rate(conn, table, args.inserts)
        print(f"  ivfflat: {entry}", flush=True)
        out["ivfflat"].append(entry)
        conn.execute("DROP INDEX bench_ivf.bench_ivf_ivf")
    conn.execute(f"DROP TABLE {table}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--tenants", nargs="+", default=["t000", "t001", "t004"])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--builds", type=int, default=3)
    ap.add_argument("--probes", type=int, nargs="+", default=[10, 20, 40])
    ap.add_argument("--inserts", type=int, default=2000, help="rows inserted one by one into each index (rolled back)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/ivfflat_ab_1m.json"))
    args = ap.parse_args(argv)
    admin = start_embedded(args.data_dir)
    world, _, sizes, tenants = L.generate(args.seed, args.size)
    qrng = np.random.default_rng(args.seed + 7 * args.size + 1)
    by_id = {td.tenant_id: td for td in tenants}
    meta = start_meta("ivfflat_ab", argv)
    result: dict[str, Any] = {"database": f"bench_latency_{args.size}", "tenants": []}
    with psycopg.connect(L.dsn_for(admin, f"bench_latency_{args.size}"), autocommit=True) as conn:
        register_vector(conn)
        for tid in args.tenants:
            td = by_id[tid]
            result["tenants"].append(measure(conn, td, L.make_queries(world, td, args.queries, qrng), args))
    write_result(args.out, meta, result)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
