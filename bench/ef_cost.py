"""What the dense branch's default search breadth costs and buys at scale: on a database that
bench/latency.py --keep-db left, the picked tenants' search_dense and hybrid_retrieve with the engine's
default ef_search (hybrid._dense_plan: it grows with the tenant's partition) against a fixed
hnsw_ef_search (--fixed, 0.2's default 100), alternating query by query (the setting is written by an
untimed admin statement before each turn), as the app role under RLS; dense recall@10 of each against
exact numpy search.

--upgrade first runs pyhybrid migrate with this checkout (a database built by an older engine).

    python bench/ef_cost.py --data-dir /tmp/t1k-data-100 --tenants 100 --upgrade --out bench/results/ef_cost_1m.json
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

from pyhybrid import connect, migrate  # noqa: E402
from pyhybrid.server import start_embedded  # noqa: E402

MODES = ["default", "fixed"]
METHODS = ["dense", "hybrid_retrieve"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--tenants", type=int, default=100)
    ap.add_argument("--picks", type=float, nargs="+", default=[0.5, 0.01])
    ap.add_argument("--queries", type=int, default=150)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--fixed", type=int, default=100)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--upgrade", action="store_true")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    tds = regenerate(args.seed, args.size, args.tenants, args.picks)
    admin = start_embedded(args.data_dir)
    db_dsn = L.dsn_for(admin, f"bench_latency_{args.size}")
    if args.upgrade:
        t0 = time.perf_counter()
        migrate.upgrade(db_dsn)
        print(f"upgraded in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    ctl = psycopg.connect(db_dsn, autocommit=True)
    client = connect(L.dsn_for(admin, f"bench_latency_{args.size}", L.APP_ROLE))

    def set_mode(mode: str) -> None:
        ctl.execute("DELETE FROM hybrid.setting WHERE key = 'hnsw_ef_search'")
        if mode == "fixed":
            ctl.execute("INSERT INTO hybrid.setting (key, value) VALUES ('hnsw_ef_search', %s)", (str(args.fixed),))

    world = L.World(args.seed)
    labels = list(tds)
    queries = {lb: L.make_queries(world, tds[lb], args.queries + args.warmup,
                                  np.random.default_rng([args.seed, zlib.crc32(lb.encode())])) for lb in labels}
    runners = {lb: L.Runner(client, tds[lb].tenant_id) for lb in labels}
    plans: dict[str, dict[str, int]] = {}
    for mode in MODES:
        set_mode(mode)
        plans[mode] = {lb: ctl.execute("SELECT hybrid._dense_plan(hybrid._tenant_key(%s), NULL, NULL, NULL, %s)",
                                       (tds[lb].tenant_id, L.PER_SOURCE_K)).fetchone()[0] for lb in labels}
    ms: dict[str, dict[str, dict[str, list[float]]]] = {m: {lb: {x: [] for x in METHODS} for lb in labels} for m in MODES}
    load: list[float] = []
    t_q = time.perf_counter()
    for i in range(args.queries + args.warmup):
        if i % 50 == 0:
            load.append(os.getloadavg()[0])
            print(f"query {i} ({time.perf_counter() - t_q:.0f} s)", file=sys.stderr)
        for mode in (MODES if i % 2 == 0 else MODES[::-1]):
            set_mode(mode)
            for lb in labels:
                for meth in (METHODS if i % 2 == 0 else METHODS[::-1]):
                    el, _ = getattr(runners[lb], meth)(queries[lb][i])
                    if i >= args.warmup:
                        ms[mode][lb][meth].append(el * 1000.0)
    recall: dict[str, dict[str, Any]] = {m: {} for m in MODES}
    for mode in MODES:
        set_mode(mode)
        for lb in labels:
            td = tds[lb]
            ids = np.array(td.chunk_ids, dtype=object)
            rs = []
            for q in queries[lb][args.warmup:]:
                sims = td.vectors @ (q.vector / np.linalg.norm(q.vector))
                exact = set(ids[np.argpartition(-sims, L.TOP_K - 1)[:L.TOP_K]])
                got = runners[lb].dense_ids(q, k=L.PER_SOURCE_K)[:L.TOP_K]
                rs.append(len(exact & set(got)) / L.TOP_K)
            recall[mode][lb] = {"mean": round(statistics.fmean(rs), 4), "min": round(min(rs), 4),
                                "zero_recall_queries": sum(1 for r in rs if r == 0)}
    set_mode("default")
    res: dict[str, Any] = {
        "command": "python " + " ".join([os.path.relpath(__file__, Path.cwd()), *(argv if argv is not None else sys.argv[1:])]),
        "date": L.dt.datetime.now(L.dt.timezone.utc).isoformat(timespec="seconds"),
        "engine": L.engine_state(), "loadavg_samples_1min": [round(x, 2) for x in load],
        "picked": {lb: {"tenant_id": td.tenant_id, "chunks": len(td.chunk_ids)} for lb, td in tds.items()},
        "ef_search": plans, "recall_at_10": recall,
        "latency_ms": {m: {lb: {x: L.summarize(v, [0] * len(v)) for x, v in d.items()} for lb, d in per.items()}
                       for m, per in ms.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))
    lines = [f"# Default search breadth against hnsw_ef_search {args.fixed}: {args.size:,} chunks, {args.tenants} tenants", "",
             f"`{res['command']}`, {res['date']}, engine {res['engine'].get('git_head', '?')}. Modes alternate query by "
             f"query; {args.queries} queries per tenant after {args.warmup} warm-up; 1-min load average {res['loadavg_samples_1min']}.", "",
             "| tenant | chunks | mode | ef_search | recall@10 (min, queries at 0) | dense p50 / p95 ms | hybrid_retrieve p50 / p95 / p99 ms |",
             "|---|---:|---|---:|---|---|---|"]
    for lb in labels:
        for mode in MODES:
            d, h = res["latency_ms"][mode][lb]["dense"], res["latency_ms"][mode][lb]["hybrid_retrieve"]
            r = recall[mode][lb]
            lines.append(f"| {lb} {tds[lb].tenant_id} | {len(tds[lb].chunk_ids):,} | {mode} | {plans[mode][lb]} | "
                         f"{r['mean']:.3f} ({r['min']:.1f}, {r['zero_recall_queries']}) | {d['p50_ms']:.2f} / {d['p95_ms']:.2f} | "
                         f"{h['p50_ms']:.2f} / {h['p95_ms']:.2f} / {h['p99_ms']:.2f} |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
