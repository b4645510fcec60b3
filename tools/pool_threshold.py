"""Where a partition of its own becomes the faster place for a tenant: the threshold of setting pool_max_chunks.

On a database of its own (dropped and made again) on the server of --dsn: --neighbours pooled tenants of 20 chunks
each fill the pool; then for each of --sizes, a tenant of that many chunks (random 384-d unit vectors, 30 words of a
2,000-word vocabulary each) is searched --queries times in the pool (hybrid_retrieve with dense and BM25, and each
branch alone), moved to a partition of its own (hybrid.move_tenant, then ANALYZE), and searched again with the same
queries. Prints and writes (--out) each size's p50 / p95 in ms in both places and their ratio.

    python tools/pool_threshold.py --dsn "host=/tmp/pg user=postgres" --sizes 250 500 1000 2000 4000 8000
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from pyhybrid import HybridClient, migrate

FILL = """INSERT INTO hybrid.chunk (tenant_id, chunk_id, corpus_id, document_id, content, embedding, content_hash,
                          tenant_key, text_config)
SELECT t.id, 'c' || i, 'c', 'd' || (i / 4),
       (SELECT string_agg('w' || floor(random() * 2000)::int, ' ') FROM generate_series(1, 30) WHERE i > 0),
       (SELECT l2_normalize(array_agg(random() - 0.5)::vector) FROM generate_series(1, 384) WHERE i > 0),
       'h' || i, hybrid._tenant_key(t.id), 'english'
FROM unnest(%s::text[]) t(id), generate_series(1, %s) i"""
SHAPES = {"hybrid": {}, "dense": {"keyword_weight": 0}, "lexical": {"vector_weight": 0}}


def fill(conn: psycopg.Connection[Any], tenants: list[str], rows: int) -> None:
    conn.execute("INSERT INTO hybrid.corpus (tenant_id, corpus_id) SELECT t, 'c' FROM unnest(%s::text[]) t", (tenants,))
    conn.execute(FILL, (tenants, rows))


def timings(dsn: str, tenant: str, queries: list[tuple[np.ndarray, str]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with HybridClient(dsn) as c:
        for shape, kw in SHAPES.items():
            ms: list[float] = []
            for i, (v, words) in enumerate(queries + queries[:3]):  # the first three again: a warm start
                t0 = time.perf_counter()
                with c.tenant(tenant) as t:
                    t.retrieve(query_embedding=v, query_text=words, graph_weight=0, top_k=10, lexical="bm25", **kw)
                if i >= 3:
                    ms.append(1000 * (time.perf_counter() - t0))
            out[shape] = {"p50": round(statistics.median(ms), 2), "p95": round(float(np.percentile(ms, 95)), 2)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", required=True, help="a superuser DSN of the server (its dbname is ignored)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000, 2000, 4000, 8000])
    ap.add_argument("--neighbours", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--database", default="pyhybrid_pool_threshold")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "bench" / "results" / "pool_threshold.json")
    args = ap.parse_args()
    with psycopg.connect(args.dsn, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{args.database}"')
    dsn = psycopg.conninfo.make_conninfo(args.dsn, dbname=args.database)
    migrate.upgrade(dsn)
    rng = np.random.default_rng(1)
    queries = [(v / np.linalg.norm(v), " ".join(f"w{w}" for w in rng.integers(0, 2000, 3)))
               for v in rng.standard_normal((args.queries, 384)).astype(np.float32)]
    report: dict[str, Any] = {"neighbours": args.neighbours, "queries": args.queries, "sizes": {}}
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SELECT hybrid.create_tenant('n' || g, NULL, 'pool') FROM generate_series(1, %s) g", (args.neighbours,))
        fill(c, [f"n{g}" for g in range(1, args.neighbours + 1)], 20)
        for n in args.sizes:
            c.execute("SELECT hybrid.create_tenant(%s, NULL, 'pool')", (f"t{n}",))
            fill(c, [f"t{n}"], n)
        c.execute("VACUUM ANALYZE")
    for n in args.sizes:
        pooled = timings(dsn, f"t{n}", queries)
        with HybridClient(dsn) as admin:
            t0 = time.perf_counter()
            admin.move_tenant(f"t{n}", "dedicated")
            move_s = round(time.perf_counter() - t0, 2)
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("ANALYZE hybrid.chunk_p" + str(c.execute("SELECT hybrid._tenant_key(%s)", (f"t{n}",)).fetchone()[0]))
        dedicated = timings(dsn, f"t{n}", queries)
        report["sizes"][n] = {"pooled_ms": pooled, "dedicated_ms": dedicated, "move_s": move_s,
                              "p95_pooled_over_dedicated": {s: round(pooled[s]["p95"] / dedicated[s]["p95"], 2)
                                                            for s in SHAPES}}
        print(json.dumps({n: report["sizes"][n]}), flush=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(args.out)


if __name__ == "__main__":
    main()
