"""Exact dense path: search_dense's statement (full sort under row_number(), spills past work_mem) vs the same
statement as a top-N subquery (row_number() outside, like the HNSW path), vs search_dense's HNSW path.

Run against a server left by bench/dense_tuning.py --keep (database bench_dense, tenants s<size>), as the app
role under RLS, a transaction per call (set hybrid.tenant_id, run), the three methods interleaved query by
query with rotating order. Queries: the same generator and seeds as dense_tuning.py (first --n after warm-up).

Caveat (first runs, 2026-12-01, load average ~9 on 2 cores): the direct top-N statement's timings were erratic
(the first size of each run was 2-5x slower than HNSW, later sizes near it: results/dense_exact_topn.json vs
dense_exact_topn_rerun.json), so they are inconclusive; sent directly it is also not planned like a plpgsql
RETURN QUERY. The structural finding is in results/dense_exact_explain.txt: search_dense's exact statement sorts
every row with its embedding (row_number() sits between LIMIT and Sort, so no top-N heapsort): 1,579 kB at
1,000 rows, 3,158 kB at 2,000, an external merge on disk at 3,000 (work_mem 4MB); the subquery form sorts 28 kB.

    PYTHONPATH=. python bench/dense_exact_topn.py DATA_DIR --sizes 500 1000 1500 2000 3000 --out bench/results/dense_exact_topn.json
"""
from __future__ import annotations

import argparse, json, os, statistics, sys, time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency as L  # noqa: E402
from pyhybrid import connect  # noqa: E402
from pyhybrid.server import start_embedded  # noqa: E402

TOPN_SQL = """SELECT s.chunk_id, (row_number() OVER (ORDER BY s.d, s.chunk_id))::integer, s.d FROM (
  SELECT c.chunk_id, (c.embedding <=> %(v)s::vector)::double precision AS d FROM hybrid.chunk c
  WHERE c.tenant_key = %(key)s
    AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, hybrid._current_tenant(), hybrid._current_acl(), hybrid._acl_all())
    AND c.embedding IS NOT NULL
  ORDER BY (c.embedding <=> %(v)s::vector) + 0, c.chunk_id LIMIT %(k)s) s ORDER BY s.d, s.chunk_id"""
KEYS: dict[str, int] = {}  # tenant key, a constant as in search_dense (looked up as the admin: the app role may not call _tenant_key)
FN_SQL = "SELECT chunk_id FROM hybrid.search_dense(%(v)s::vector, %(k)s, NULL, NULL, %(thr)s)"


def call(client, tenant, method, v, k):
    t0 = time.perf_counter()
    with client.connection() as conn, conn.transaction():
        conn.execute(L.SET_TENANT, (tenant,))
        if method == "exact_topn":
            ids = [r[0] if not isinstance(r, dict) else r["chunk_id"] for r in conn.execute(TOPN_SQL, {"v": v, "k": k, "key": KEYS[tenant]}).fetchall()]
        else:
            thr = 2**31 - 1 if method == "fn_exact" else 0
            ids = [r["chunk_id"] if isinstance(r, dict) else r[0] for r in conn.execute(FN_SQL, {"v": v, "k": k, "thr": thr}).fetchall()]
    return (time.perf_counter() - t0) * 1000.0, ids


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 1500, 2000, 3000])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--top-k", type=int, default=30)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--out", type=Path, default=Path("bench/results/dense_exact_topn.json"))
    a = ap.parse_args()
    admin = start_embedded(a.data_dir)
    app_dsn = L.dsn_for(admin, "bench_dense", L.APP_ROLE)
    import psycopg
    with psycopg.connect(L.dsn_for(admin, "bench_dense")) as c:
        for n in a.sizes:
            KEYS[f"s{n:06d}"] = c.execute("SELECT hybrid._tenant_key(%s)", (f"s{n:06d}",)).fetchone()[0]
    world = L.World(a.seed)
    methods = ["fn_exact", "exact_topn", "fn_hnsw"]
    rep = {"command": "python " + " ".join(sys.argv), "loadavg_start": os.getloadavg(), "top_k": a.top_k, "runs": []}
    with connect(app_dsn) as client:
        for n in a.sizes:
            td = L.make_tenant(world, f"s{n:06d}", n, np.random.default_rng(a.seed + 31 * n + 5))
            qs = L.make_queries(world, td, 20 + a.n, np.random.default_rng(a.seed + 7 * n + 2))
            ms = {m: [] for m in methods}
            agree = []
            for q in qs[:5]:
                for m in methods:
                    call(client, td.tenant_id, m, L.vector_literal(q.vector), a.top_k)
            for i, q in enumerate(qs[20:20 + a.n]):
                v = L.vector_literal(q.vector)
                got = {}
                for m in methods[i % 3:] + methods[: i % 3]:
                    el, ids = call(client, td.tenant_id, m, v, a.top_k)
                    ms[m].append(el)
                    got[m] = ids
                agree.append(got["fn_exact"] == got["exact_topn"])
            r = {"chunks": n, "n": a.n, "topn_same_ids_in_order_share": sum(agree) / len(agree)}
            for m in methods:
                r[m] = {"p50_ms": round(L.pct(ms[m], 50), 3), "p95_ms": round(L.pct(ms[m], 95), 3)}
            r["fn_exact_over_hnsw_p50"] = round(r["fn_exact"]["p50_ms"] / r["fn_hnsw"]["p50_ms"], 3)
            r["exact_topn_over_hnsw_p50"] = round(r["exact_topn"]["p50_ms"] / r["fn_hnsw"]["p50_ms"], 3)
            r["exact_topn_over_hnsw_p95"] = round(r["exact_topn"]["p95_ms"] / r["fn_hnsw"]["p95_ms"], 3)
            r["exact_topn_over_hnsw_median_paired"] = round(statistics.median(
                [x / y for x, y in zip(ms["exact_topn"], ms["fn_hnsw"])]), 3)
            rep["runs"].append(r)
            print(json.dumps(r), file=sys.stderr)
            rep["loadavg_end"] = os.getloadavg()
            a.out.write_text(json.dumps(rep, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
