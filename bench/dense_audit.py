"""One-off: the dense branch's audit (setting dense_audit_rows) against none, on the 50,000-chunk tenant of a kept
`latency.py --sizes 100000 --tenants 2 --picks 0.5 --bulk-above 100000 --keep-db` database: for each of --builds HNSW
builds of its partition (m, ef_construction as given), every query through hybrid.search_dense as the app role, the
audit settings rotating query by query; recall@10 against exact numpy search, queries at 0, latency, fallbacks.

    python bench/dense_audit.py --data-dir /tmp/miss-data --builds 6 --queries 1000 --out /tmp/dense_audit.json
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

import latency as L
from _common import start_meta, summarize, vector_literal, write_result
from pyhybrid import migrate
from pyhybrid.server import start_embedded


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--size", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--query-seed", type=int, default=12345)
    ap.add_argument("--builds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--graphs", nargs="+", default=["16,64"], help="m,ef_construction of each graph measured")
    ap.add_argument("--audits", type=int, nargs="+", default=[1000, 0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    meta = start_meta("dense_audit", argv)
    admin = start_embedded(args.data_dir)
    db, app = L.dsn_for(admin, f"bench_latency_{args.size}"), L.dsn_for(admin, f"bench_latency_{args.size}", L.APP_ROLE)
    migrate.upgrade(db)
    world, _, _, tenants = L.generate(args.seed, args.size)
    td = max(tenants, key=lambda t: len(t.chunk_ids))
    qs = L.make_queries(world, td, args.queries, np.random.default_rng(args.query_seed))
    exact = [L.exact_top(td, q, 10) for q in qs]
    runs: list[dict[str, Any]] = []
    with psycopg.connect(db, autocommit=True) as conn, psycopg.connect(app, autocommit=True) as ac:
        part = conn.execute("SELECT hybrid._chunk_partition(k)::text FROM hybrid._tenant_key(%s) k", (td.tenant_id,)).fetchone()[0]
        conn.execute("SELECT hybrid.suspend_vector_index()")
        conn.execute("SET maintenance_work_mem = '1GB'")
        for graph in args.graphs:
            m, efc = map(int, graph.split(","))
            for b in range(args.builds):
                conn.execute("DROP INDEX IF EXISTS hybrid.bench_audit")
                t0 = time.perf_counter()
                conn.execute(f"CREATE INDEX bench_audit ON {part} USING hnsw (embedding vector_cosine_ops) "
                             f"WITH (m = {m}, ef_construction = {efc}) WHERE NOT superseded")
                run: dict[str, Any] = {"m": m, "ef_construction": efc, "build": b, "build_s": round(time.perf_counter() - t0, 1)}
                got: dict[int, dict[str, list[Any]]] = {a: {"ms": [], "recall": [], "audit": []} for a in args.audits}
                for i, q in enumerate(qs):
                    for a in args.audits[i % len(args.audits):] + args.audits[: i % len(args.audits)]:
                        conn.execute("INSERT INTO hybrid.setting (key, value) VALUES ('dense_audit_rows', %s) "
                                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(a),))
                        with ac.transaction():
                            ac.execute("SELECT set_config('hybrid.tenant_id', %s, true)", (td.tenant_id,))
                            t0 = time.perf_counter()
                            ids = [r[0] for r in ac.execute("SELECT chunk_id FROM hybrid.search_dense(%s::vector, 30)",
                                                            (vector_literal(q.vector),)).fetchall()]
                            got[a]["ms"].append(1000 * (time.perf_counter() - t0))
                            got[a]["audit"].append(ac.execute("SELECT current_setting('hybrid.dense_audit', true)").fetchone()[0])
                        got[a]["recall"].append(len(exact[i] & set(ids[:10])) / 10)
                for a, v in got.items():
                    run[f"audit_{a}"] = {**summarize(v["ms"]), "recall_at_10_mean": round(statistics.fmean(v["recall"]), 4),
                                         "recall_at_10_min": min(v["recall"]), "zero_recall_queries": v["recall"].count(0.0),
                                         "below_half": sum(r < 0.5 for r in v["recall"]),
                                         "exact_fallbacks": sum(str(x).startswith("failed") for x in v["audit"])}
                print(run, file=sys.stderr)
                runs.append(run)
        conn.execute("DROP INDEX IF EXISTS hybrid.bench_audit")
        conn.execute("DELETE FROM hybrid.setting WHERE key = 'dense_audit_rows'")
        conn.execute("SELECT hybrid.resume_vector_index()")
    totals = {f"{g}_audit_{a}": {k: sum(r[f"audit_{a}"][k] for r in runs if f"{r['m']},{r['ef_construction']}" == g)
                                 for k in ("zero_recall_queries", "below_half", "exact_fallbacks")}
              for g in args.graphs for a in args.audits}
    write_result(args.out, meta, {"tenant": td.tenant_id, "chunks": len(td.chunk_ids), "queries": args.queries,
                                  "runs": runs, "totals": totals})
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
