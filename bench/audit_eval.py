"""One-off: which sample finds the dense branch's misses at the kept 1M database's 50% tenant? The HNSW lists without
the audit (dense_audit_rows 0) at several ef_search, against exact numpy search; each candidate sample (the engine's
TABLESAMPLE SYSTEM blocks, rows by hashtext(chunk_id)) judged offline by the audit's rule: a sampled chunk nearer
than the list's 10th row and not in it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import psycopg

from _common import start_meta, vector_literal, write_result
from latency import APP_ROLE, dsn_for, generate, make_queries
from pyhybrid import connect, migrate
from pyhybrid.server import start_embedded


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/pyhybrid-bench-latency"))
    ap.add_argument("--size", type=int, default=1000000)
    ap.add_argument("--tenant", default="t000")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--efs", type=int, nargs="+", default=[100, 200, 300])
    ap.add_argument("--samples", type=int, nargs="+", default=[1000, 2000])
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--out", type=Path, default=Path("bench/results/audit_eval.json"))
    args = ap.parse_args()
    meta = start_meta("audit_eval")
    admin = start_embedded(args.data_dir)
    db_dsn = dsn_for(admin, f"bench_latency_{args.size}")
    migrate.upgrade(db_dsn)
    world, _, _, tenants = generate(args.seed, args.size)
    td = next(t for t in tenants if t.tenant_id == args.tenant)
    del tenants
    pos = {c: i for i, c in enumerate(td.chunk_ids)}
    qs = make_queries(world, td, args.queries, np.random.default_rng(args.seed + 1234))
    samples: dict[str, np.ndarray] = {}
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        part, n = conn.execute("SELECT hybrid._chunk_partition(k)::text, (SELECT reltuples FROM pg_class WHERE oid = "
                               "hybrid._chunk_partition(k)) FROM hybrid._tenant_key(%s) k", (args.tenant,)).fetchone()
        for m in args.samples:
            ids = conn.execute(f"SELECT chunk_id FROM {part} c TABLESAMPLE SYSTEM (%s) REPEATABLE (0) WHERE NOT superseded",
                               (100.0 * m / n,)).fetchall()
            samples[f"system_{m}"] = np.array([pos[r[0]] for r in ids])
            t = int(-2 ** 31 + 2 ** 32 * m / n)
            ids = conn.execute(f"SELECT chunk_id FROM {part} WHERE NOT superseded AND hashtext(chunk_id) < %s", (t,)).fetchall()
            samples[f"hash_{m}"] = np.array([pos[r[0]] for r in ids])
        conn.execute("INSERT INTO hybrid.setting (key, value) VALUES ('dense_audit_rows', '0') "
                     "ON CONFLICT (key) DO UPDATE SET value = '0'")
    print({k: len(v) for k, v in samples.items()}, flush=True)
    out: dict = {"samples": {k: len(v) for k, v in samples.items()}, "efs": {}}
    try:
        with connect(dsn_for(admin, f"bench_latency_{args.size}", APP_ROLE)) as client, client.connection() as c:
            for ef in args.efs:
                with psycopg.connect(db_dsn, autocommit=True) as a:
                    a.execute("INSERT INTO hybrid.setting (key, value) VALUES ('hnsw_ef_search', %s) "
                              "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(ef),))
                rows = []
                for q in qs:
                    with c.transaction():
                        c.execute("SELECT set_config('hybrid.tenant_id', %s, true)", (td.tenant_id,))
                        got = c.execute("SELECT chunk_id, value FROM hybrid.search_dense(%s::vector, 30, exact_threshold => 0) "
                                        "ORDER BY rank", (vector_literal(q.vector),)).fetchall()
                    sims = td.vectors @ (q.vector / np.linalg.norm(q.vector))
                    exact = set(np.argpartition(-sims, 9)[:10].tolist())
                    lst = [pos[r["chunk_id"]] for r in got]
                    d10 = got[min(9, len(got) - 1)]["value"]
                    recall = len(exact & set(lst[:10])) / 10
                    caught = {k: bool(np.any(((1.0 - sims[s]) < d10 - 1e-6) & ~np.isin(s, lst))) for k, s in samples.items()}
                    rows.append({"recall": recall, "d10": round(d10, 4), "exact_d10": round(float(1 - np.sort(sims)[-10]), 4),
                                 "caught": caught})
                misses = [r for r in rows if r["recall"] < 1]
                summ = {"recall_mean": round(float(np.mean([r["recall"] for r in rows])), 4),
                        "misses": len(misses), "zero": sum(r["recall"] == 0 for r in rows),
                        "below_half": sum(r["recall"] < 0.5 for r in rows)}
                for k in samples:
                    summ[f"{k}_catches_zero"] = sum(r["caught"][k] for r in rows if r["recall"] == 0)
                    summ[f"{k}_catches_below_half"] = sum(r["caught"][k] for r in rows if r["recall"] < 0.5)
                    summ[f"{k}_catches_any_miss"] = sum(r["caught"][k] for r in misses)
                    summ[f"{k}_fires_on_full"] = sum(r["caught"][k] for r in rows if r["recall"] == 1)
                print(ef, summ, flush=True)
                out["efs"][ef] = {"summary": summ, "rows": rows}
    finally:
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM hybrid.setting WHERE key IN ('dense_audit_rows', 'hnsw_ef_search')")
    write_result(args.out, meta, out)


if __name__ == "__main__":
    main()
