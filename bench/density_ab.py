"""The denser HNSW graph of a large partition against pgvector's default one, side by side.

On a database that bench/latency.py --keep-db left (engine from 98f644e: a partition of at least
hnsw_dense_rows chunks gets m 24, ef_construction 128), a second HNSW index with pgvector's defaults
(m 16, ef_construction 64) is built on the picked tenant's partition (not attached; its build time is
recorded). Then, query by query, each mode, a (graph, ef_search) pair, runs search_dense and
hybrid_retrieve as the app role under RLS: the graph is chosen by marking the other index not valid
for the planner (pg_index.indisvalid, an untimed superuser UPDATE: a benchmark's device, never the
product's), ef_search by the hnsw_ef_search setting. Modes rotate their order each query, so load on
the shared machine hits them alike: read the ratios. Dense recall@10 of each mode against exact numpy
search; queries some mode misses entirely are described (their topic cluster, how many of the
tenant's chunks belong to it). The extra index is dropped at the end.

    python bench/density_ab.py --data-dir /tmp/lat1m-b --out bench/results/density_ab_1m.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import latency as L  # noqa: E402
from latency_layouts import regenerate  # noqa: E402

from pyhybrid import connect  # noqa: E402
from pyhybrid.server import start_embedded  # noqa: E402

METHODS = ["dense", "hybrid_retrieve"]
ALT = "bench_density_ab_m16"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--tenants", type=int, default=100)
    ap.add_argument("--pick", type=float, default=0.5, help="the row share of the tenant measured")
    ap.add_argument("--queries", type=int, default=150)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--modes", nargs="+", default=["dense:200", "dense:300", "dense:400", "default:400"],
                    help="GRAPH:EF pairs; GRAPH is dense (the partition's own index) or default (m 16, ef_construction 64)")
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    modes = [(m.split(":")[0], int(m.split(":")[1])) for m in args.modes]
    names = [f"{g} ef {ef}" for g, ef in modes]

    tds = regenerate(args.seed, args.size, args.tenants, [args.pick])
    (label, td), = tds.items()
    admin = start_embedded(args.data_dir)
    db_dsn = L.dsn_for(admin, f"bench_latency_{args.size}")
    ctl = psycopg.connect(db_dsn, autocommit=True)
    part = ctl.execute("SELECT hybrid._chunk_partition(hybrid._tenant_key(%s))::text", (td.tenant_id,)).fetchone()[0]
    own = ctl.execute("SELECT x.indexrelid::regclass::text, c.reloptions FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
                      "JOIN pg_inherits i ON i.inhrelid = x.indexrelid AND i.inhparent = 'hybrid.chunk_embedding_hnsw'::regclass "
                      "WHERE x.indrelid = %s::regclass", (part,)).fetchone()
    print(f"{label} {td.tenant_id}: {part}, its index {own[0]} {own[1]}", file=sys.stderr)
    ctl.execute(f"DROP INDEX IF EXISTS hybrid.{ALT}")
    index = {"dense": own[0]}
    alt_build_s = None
    if any(g == "default" for g, _ in modes):  # only breadths of the partition's own graph: no second index
        ctl.execute("SET maintenance_work_mem = '2GB'")
        t0 = time.perf_counter()
        ctl.execute(f"CREATE INDEX {ALT} ON {part} USING hnsw (embedding vector_cosine_ops) WHERE NOT superseded")
        alt_build_s = round(time.perf_counter() - t0, 1)
        print(f"built {ALT} (m 16, ef_construction 64) in {alt_build_s} s", file=sys.stderr)
        index["default"] = f"hybrid.{ALT}"
    current: dict[str, Any] = {"graph": None, "ef": None}

    def set_mode(graph: str, ef: int) -> None:
        if current["graph"] != graph:
            for g, idx in index.items():
                ctl.execute("UPDATE pg_index SET indisvalid = %s WHERE indexrelid = %s::regclass", (g == graph, idx))
            current["graph"] = graph
        if current["ef"] != ef:
            ctl.execute("INSERT INTO hybrid.setting (key, value) VALUES ('hnsw_ef_search', %s) "
                        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (str(ef),))
            current["ef"] = ef

    client = connect(L.dsn_for(admin, f"bench_latency_{args.size}", L.APP_ROLE))
    world = L.World(args.seed)
    queries = L.make_queries(world, td, args.queries + args.warmup, np.random.default_rng([args.seed, zlib.crc32(label.encode())]))
    run = L.Runner(client, td.tenant_id)
    ms: dict[str, dict[str, list[float]]] = {n: {m: [] for m in METHODS} for n in names}
    load: list[float] = []
    t_q = time.perf_counter()
    try:
        for i in range(args.queries + args.warmup):
            if i % 50 == 0:
                load.append(os.getloadavg()[0])
                print(f"query {i} ({time.perf_counter() - t_q:.0f} s)", file=sys.stderr)
            k = i % len(modes)
            for (graph, ef), name in list(zip(modes, names))[k:] + list(zip(modes, names))[:k]:
                set_mode(graph, ef)
                for meth in (METHODS if i % 2 == 0 else METHODS[::-1]):
                    el, _ = getattr(run, meth)(queries[i])
                    if i >= args.warmup:
                        ms[name][meth].append(el * 1000.0)
        ids = np.array(td.chunk_ids, dtype=object)
        exact_sets, sims_all = [], []
        for q in queries[args.warmup:]:
            sims = td.vectors @ (q.vector / np.linalg.norm(q.vector))
            exact_sets.append(set(ids[np.argpartition(-sims, L.TOP_K - 1)[:L.TOP_K]]))
            sims_all.append(sims)
        per_query: dict[str, list[float]] = {}
        for (graph, ef), name in zip(modes, names):
            set_mode(graph, ef)
            per_query[name] = [len(ex & set(run.dense_ids(q, k=L.PER_SOURCE_K)[:L.TOP_K])) / L.TOP_K
                               for q, ex in zip(queries[args.warmup:], exact_sets)]
    finally:
        set_mode("dense", 0)
        ctl.execute("DELETE FROM hybrid.setting WHERE key = 'hnsw_ef_search'")
        ctl.execute(f"DROP INDEX IF EXISTS hybrid.{ALT}")
    missed = []
    for j in range(len(exact_sets)):
        if min(per_query[n][j] for n in names) < 0.5:
            top = np.argsort(-sims_all[j])[:L.TOP_K]
            cl = int(td.clusters[top[0]])
            missed.append({"query": j, "recall": {n: per_query[n][j] for n in names},
                           "exact_top_similarity": round(float(sims_all[j][top[0]]), 4),
                           "exact_top10_clusters": sorted({int(td.clusters[t]) for t in top}),
                           "tenant_chunks_in_that_cluster": int((td.clusters == cl).sum()),
                           "tenant_chunks": len(td.chunk_ids)})
    res: dict[str, Any] = {
        "command": "python " + " ".join([os.path.relpath(__file__, Path.cwd()), *(argv if argv is not None else sys.argv[1:])]),
        "date": L.dt.datetime.now(L.dt.timezone.utc).isoformat(timespec="seconds"),
        "engine": L.engine_state(), "loadavg_samples_1min": [round(x, 2) for x in load],
        "tenant": {"label": label, "tenant_id": td.tenant_id, "chunks": len(td.chunk_ids), "partition": part,
                   "own_index": own[0], "own_reloptions": own[1]},
        "alt_index_build_s": alt_build_s,
        "recall_at_10": {n: {"mean": round(statistics.fmean(v), 4), "min": round(min(v), 4),
                             "zero_recall_queries": sum(1 for r in v if r == 0),
                             "mean_without_zero_recall_queries": round(statistics.fmean([r for r in v if r > 0] or [0]), 4)}
                         for n, v in per_query.items()},
        "missed_queries": missed,
        "latency_ms": {n: {m: L.summarize(v, [0] * len(v)) for m, v in d.items()} for n, d in ms.items()},
    }
    base = names[-1]
    res["ratio_to_" + base.replace(" ", "_")] = {
        n: {m: {"p50": round(res["latency_ms"][n][m]["p50_ms"] / res["latency_ms"][base][m]["p50_ms"], 3),
                "p95": round(res["latency_ms"][n][m]["p95_ms"] / res["latency_ms"][base][m]["p95_ms"], 3)} for m in METHODS}
        for n in names}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))
    lines = [f"# Denser HNSW graph vs pgvector's default on the {label} tenant ({len(td.chunk_ids):,} chunks of {args.size:,})", "",
             f"`{res['command']}`, {res['date']}, engine {res['engine'].get('git_head', '?')}. The partition's own index "
             f"{own[0]} ({own[1]}); " + (f"the default graph built beside it in {alt_build_s} s. " if alt_build_s else "") +
             "Modes rotate query by query; "
             f"{args.queries} queries after {args.warmup} warm-up; 1-min load average {res['loadavg_samples_1min']}.", "",
             f"| mode | recall@10 | min | queries at 0 | mean without them | dense p50 / p95 ms | hybrid_retrieve p50 / p95 / p99 ms | "
             f"dense p50, p95 / {base} | hybrid p50, p95 / {base} |",
             "|---|---:|---:|---:|---:|---|---|---|---|"]
    for n in names:
        r, d, h = res["recall_at_10"][n], res["latency_ms"][n]["dense"], res["latency_ms"][n]["hybrid_retrieve"]
        rr = res["ratio_to_" + base.replace(" ", "_")][n]
        lines.append(f"| {n} | {r['mean']:.4f} | {r['min']:.1f} | {r['zero_recall_queries']} | {r['mean_without_zero_recall_queries']:.4f} | "
                     f"{d['p50_ms']:.2f} / {d['p95_ms']:.2f} | {h['p50_ms']:.2f} / {h['p95_ms']:.2f} / {h['p99_ms']:.2f} | "
                     f"{rr['dense']['p50']:.2f}, {rr['dense']['p95']:.2f} | {rr['hybrid_retrieve']['p50']:.2f}, {rr['hybrid_retrieve']['p95']:.2f} |")
    if missed:
        lines += ["", "Queries some mode missed (recall@10 below 0.5):", ""]
        for mq in missed:
            lines.append(f"- query {mq['query']}: recall {mq['recall']}; exact top similarity {mq['exact_top_similarity']}, "
                         f"exact top 10 from clusters {mq['exact_top10_clusters']}; {mq['tenant_chunks_in_that_cluster']:,} of the "
                         f"tenant's {mq['tenant_chunks']:,} chunks in the top hit's cluster")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
