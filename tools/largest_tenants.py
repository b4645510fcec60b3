"""The largest tenants of a kept database, searched before and after hybrid.merge_bm25, side by side.

bench/tenants.py leaves its database (bench_tenants) on its embedded server. Its largest tenants (its --large-rows
ones), created dedicated and filled by one ingest each, hold latency.py's clustered world (--bench-seed: the bench's
--seed), and their BM25 index in many segments until an operator runs merge_bm25 (what docs/operations.md asks after
a batch of ingests). For each of the --largest tenants by chunk count: --queries hybrid_retrieve calls (dense and BM25,
top 10, drawn from the tenant's topics as latency.py draws them) as a tenant login role, then merge_bm25 for those
tenants (timed), then the same queries again. Writes p50 / p95 in ms before and after, their ratio, and beside them
hybrid_retrieve's p50 / p95 from bench/results/latency_*.json (a tenant of that size among 100 on one server).

    python tools/largest_tenants.py --dsn "host=/tmp/pyhybrid-bench-tenants user=postgres dbname=bench_tenants"
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import conninfo

from pyhybrid import connect, maintenance

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from _common import pct
from latency import World, make_queries, make_tenant


def timings(dsn: str, tenant: str, queries: list[dict[str, Any]]) -> dict[str, float]:
    role = "lt_r_" + tenant
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"DO $$ BEGIN CREATE ROLE {role} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        admin.execute("SELECT hybrid.grant_tenant(%s, %s)", (role, tenant))
    ms = []
    with connect(conninfo.make_conninfo(dsn, user=role)) as client:
        for q in queries[:3]:  # warm the connection
            with client.tenant(tenant) as t:
                t.retrieve(**q)
        for q in queries:
            t0 = time.perf_counter()
            with client.tenant(tenant) as t:
                t.retrieve(**q)
            ms.append((time.perf_counter() - t0) * 1000)
    return {"n": len(ms), "p50": round(statistics.median(ms), 2), "p95": round(pct(ms, 95), 2)}


def latency_reference() -> list[dict[str, Any]]:
    """hybrid_retrieve's p50 / p95 (ms) by tenant size in bench/results/latency_*.json (100 tenants on one server)."""
    out = []
    for path in sorted((ROOT / "bench" / "results").glob("latency_*.json")):
        for run in json.loads(path.read_text()).get("runs", []):
            for pick, v in (run.get("latency") or {}).items():
                h = v.get("hybrid_retrieve") if isinstance(v, dict) else None
                if isinstance(h, dict) and "p95_ms" in h:
                    out.append({"file": path.name, "pick": pick, "chunks": v.get("chunks"), "p50": h.get("p50_ms"),
                                "p95": h.get("p95_ms")})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--largest", type=int, default=3)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--bench-seed", type=int, default=11, help="bench/tenants.py's --seed (its large tenants' world)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "largest_tenants.json")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    with psycopg.connect(args.dsn) as c:
        big = c.execute("SELECT t.tenant_id, s.n_docs FROM hybrid.tenant t JOIN hybrid.bm25_tenant_stats s "
                        "USING (tenant_key) ORDER BY s.n_docs DESC LIMIT %s", (args.largest,)).fetchall()
    out: dict[str, Any] = {"dsn_db": conninfo.conninfo_to_dict(args.dsn).get("dbname"), "queries": args.queries,
                           "latency_bench_hybrid_retrieve_ms": latency_reference(), "tenants": []}
    world = World(args.bench_seed)
    for tenant, chunks in big:
        td = make_tenant(world, tenant, int(chunks), np.random.default_rng([args.bench_seed, int(tenant[1:])]))
        queries = [{"query_embedding": q.vector, "query_text": q.text, "top_k": 10, "lexical": "bm25"}
                   for q in make_queries(world, td, args.queries, rng)]
        before = timings(args.dsn, tenant, queries)
        t0 = time.perf_counter()
        merged = maintenance.merge_bm25(args.dsn, [tenant])
        merge_s = round(time.perf_counter() - t0, 1)
        after = timings(args.dsn, tenant, queries)
        row = {"tenant": tenant, "chunks": int(chunks), "before_merge_ms": before, "merge_s": merge_s,
               "merged": str(merged), "after_merge_ms": after,
               "p95_ratio_after_to_before": round(after["p95"] / before["p95"], 2)}
        print(json.dumps(row), flush=True)
        out["tenants"].append(row)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
