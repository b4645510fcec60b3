"""One-off: vector against halfvec HNSW on the kept 1M database's 50% tenant, through the engine (audit included).

Each build: the partition's engine index (vector, the density hybrid._hnsw_density gives it) and a halfvec index of the
same density beside it (hybrid._dense_index_key(dim, 'halfvec')), the two built in alternating order, then --queries
queries read once through both (unmeasured: both indexes warm) and measured, the kinds alternating query by query in ABBA order (the setting dense_index_kind switched between them, so hybrid.search_dense runs its own statement
for each kind); recall@10 against exact numpy search, the audit's outcome, search_dense and hybrid_retrieve times.
--builds N rebuilds both indexes N - 1 times (REINDEX), timing each build.

python bench/kind_ab.py --data-dir /tmp/pyhybrid-bench-latency --builds 3 --queries 300 --out bench/results/kind_ab.json
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

from _common import control_ms, engine_state, start_meta, summarize, vector_literal, write_result
import latency as L

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--data-dir", type=Path, default=Path("/tmp/pyhybrid-bench-latency"))
ap.add_argument("--builds", type=int, default=3)
ap.add_argument("--queries", type=int, default=300)
ap.add_argument("--out", type=Path, default=Path("bench/results/kind_ab.json"))
args = ap.parse_args()
meta = start_meta("kind_ab", sys.argv[1:])
host = str(args.data_dir)
db = f"postgresql://postgres:@/bench_latency_1000000?host={host}"
app = f"postgresql://{L.APP_ROLE}:@/bench_latency_1000000?host={host}"

world, _, sizes, tenants = L.generate(20240501, 1000000)
td = tenants[dict((lb, i) for lb, i in L.choose_picks(sizes))["50pct"]]
queries = L.make_queries(world, td, args.queries, np.random.default_rng(4242))
exact = [L.exact_top(td, q, L.TOP_K) for q in queries]
KINDS = ["vector", "halfvec"]

admin = psycopg.connect(db, autocommit=True)
key, part = admin.execute("SELECT k, hybrid._chunk_partition(k)::text FROM hybrid._tenant_key(%s) k", (td.tenant_id,)).fetchone()
rows, m, efc = admin.execute(f"SELECT n, d.m, d.ef_construction FROM (SELECT count(*) AS n FROM {part} WHERE NOT superseded) c, "
                             "hybrid._hnsw_density(c.n) d").fetchone()
admin.execute("SELECT set_config('maintenance_work_mem', %s, false)",
              (f"{admin.execute('SELECT hybrid._hnsw_build_memory(%s, %s)', (rows, m)).fetchone()[0] // 1024}kB",))
index = {"vector": f"{part}_embedding_idx", "halfvec": "hybrid.bench_kind_halfvec"}
hv_key = admin.execute("SELECT hybrid._dense_index_key(%s, 'halfvec')", (L.DIM,)).fetchone()[0]
report: dict[str, Any] = {"tenant": td.tenant_id, "rows": rows, "m": m, "ef_construction": efc, "builds": []}


def set_kind(kind: str) -> None:
    admin.execute("INSERT INTO hybrid.setting (key, value) VALUES ('dense_index_kind', %s) "
                  "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (kind,))


try:
    t0, first_halfvec_s = time.perf_counter(), None
    if admin.execute("SELECT to_regclass(%s) IS NULL", (index["halfvec"],)).fetchone()[0]:  # else an earlier run's
        admin.execute(f"CREATE INDEX bench_kind_halfvec ON {part} USING hnsw ({hv_key}) "
                      f"WITH (m = {m}, ef_construction = {efc}) WHERE NOT superseded")
        first_halfvec_s = round(time.perf_counter() - t0, 1)
    for b in range(args.builds):
        build: dict[str, Any] = {"control_ms_before": control_ms(), "build_s": {}}
        if b == 0:
            build["build_s"] = {"vector": None, "halfvec": first_halfvec_s}  # vector: the load's own build
        else:
            for k in (KINDS if b % 2 else KINDS[::-1]):  # the kind built last has its pages in shared buffers: alternate
                t0 = time.perf_counter()
                admin.execute(f"REINDEX INDEX {index[k]}")
                build["build_s"][k] = round(time.perf_counter() - t0, 1)
        build["size_mb"] = {k: round(admin.execute("SELECT pg_relation_size(%s::regclass) / 1048576.0::float8",
                                                   (index[k],)).fetchone()[0], 1) for k in KINDS}
        ms: dict[str, dict[str, list[float]]] = {k: {"dense": [], "hybrid_retrieve": []} for k in KINDS}
        recall: dict[str, list[float]] = {k: [] for k in KINDS}
        audit: dict[str, dict[str, int]] = {k: {} for k in KINDS}
        with psycopg.connect(app) as conn:
            for q in queries:  # a pass that reads both indexes' pages for these queries: both kinds measured warm
                for k in KINDS:
                    set_kind(k)
                    with conn.transaction():
                        conn.execute(L.SET_TENANT, (td.tenant_id,))
                        conn.execute(L.DENSE_SQL, (vector_literal(q.vector), L.PER_SOURCE_K)).fetchall()
            for i, q in enumerate(queries):
                v = vector_literal(q.vector)
                for k in (KINDS if i % 4 in (0, 3) else KINDS[::-1]):
                    set_kind(k)
                    with conn.transaction():
                        conn.execute(L.SET_TENANT, (td.tenant_id,))
                        t1 = time.perf_counter()
                        got = [r[0] for r in conn.execute(L.DENSE_SQL, (v, L.PER_SOURCE_K)).fetchall()]
                        ms[k]["dense"].append(1000 * (time.perf_counter() - t1))
                        outcome = conn.execute("SELECT current_setting('hybrid.dense_audit', true)").fetchone()[0]
                    audit[k][outcome] = audit[k].get(outcome, 0) + 1
                    recall[k].append(len(exact[i] & set(got[:L.TOP_K])) / L.TOP_K)
                    with conn.transaction():
                        conn.execute(L.SET_TENANT, (td.tenant_id,))
                        t1 = time.perf_counter()
                        conn.execute("SELECT * FROM hybrid_retrieve(query_embedding => %s::vector, query_text => %s, "
                                     "graph_seeds => %s, top_k => 10, rrf_k => 60, vector_weight => 1, keyword_weight => 1, "
                                     "graph_weight => 0.5)", (v, q.text, q.seeds)).fetchall()
                        ms[k]["hybrid_retrieve"].append(1000 * (time.perf_counter() - t1))
        build["kinds"] = {k: {"dense": summarize(ms[k]["dense"], []), "hybrid_retrieve": summarize(ms[k]["hybrid_retrieve"], []),
                              "recall_at_10_mean": round(statistics.fmean(recall[k]), 4), "recall_at_10_min": min(recall[k]),
                              "zero_recall_queries": recall[k].count(0.0), "below_half": sum(r < 0.5 for r in recall[k]),
                              "audit": audit[k]} for k in KINDS}
        build["control_ms_after"] = control_ms()
        report["builds"].append(build)
        print(b, {k: (build["kinds"][k]["dense"]["p50_ms"], build["kinds"][k]["dense"]["p95_ms"],
                      build["kinds"][k]["recall_at_10_mean"], build["kinds"][k]["zero_recall_queries"]) for k in KINDS},
              build["build_s"], file=sys.stderr)
        write_result(args.out, meta, report)
finally:
    admin.execute("DELETE FROM hybrid.setting WHERE key = 'dense_index_kind'")
    admin.execute(f"DROP INDEX IF EXISTS {index['halfvec']}")
report["engine_at_end"] = engine_state()
write_result(args.out, meta, report)
print(args.out)
