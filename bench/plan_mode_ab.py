"""One-off: the engine's catalog and settings helpers planned once a session against on every call.

The branches run under plan_cache_mode = force_custom_plan (their reads of hybrid.chunk are planned for the
tenant's partition alone), and the helpers they call inherited it: their catalog and settings reads were
planned anew on every call. The checkout gives those helpers force_generic_plan; this toggles that SET clause
with ALTER FUNCTION between short blocks of queries on a kept 1M database (a latency.py --keep-db run),
alternating which mode goes first, the first query after each toggle not counted (it plans once either way).
hybrid_retrieve and client-side fusion, both through the benchmark's Runner, as the app role.

    python bench/plan_mode_ab.py --data-dir /path/to/kept/server --blocks 60 --block 10
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency as L  # noqa: E402
from _common import pct, start_meta, write_result  # noqa: E402

from pyhybrid import connect, migrate  # noqa: E402

HELPERS = ["_hnsw_dense_vectors(regclass)", "_dense_plan(integer,text[],jsonb,integer,integer)",
           "_bm25_partition_index(integer)", "_audit_sample_rows(regclass,integer)", "_dense_kind(integer)",
           "_bm25_scan_exact(regclass)", "_bm25_ready(regclass)", "_bm25_generation()", "_tenant_key(text)"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--blocks", type=int, default=60)
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "plan_mode_ab.json")
    args = ap.parse_args()
    meta = start_meta("plan_mode_ab")
    admin = L.start_embedded(args.data_dir)
    db = L.dsn_for(admin, f"bench_latency_{args.size}")
    migrate.upgrade(db)  # the checkout's engine: the helpers with force_generic_plan
    world, _, sizes, tenants = L.generate(args.seed, args.size)
    picks = {label: tenants[i] for label, i in L.choose_picks(sizes)}
    n_q = args.blocks * (args.block + 1)
    queries = {label: L.make_queries(world, td, min(n_q, 400), np.random.default_rng(args.seed + 77))
               for label, td in picks.items()}
    ms: dict[str, dict[str, list[float]]] = {}
    with psycopg.connect(db, autocommit=True) as adm, connect(L.dsn_for(admin, f"bench_latency_{args.size}", L.APP_ROLE)) as app:
        def mode(generic: bool) -> None:
            for f in HELPERS:
                adm.execute(f"ALTER FUNCTION hybrid.{f} "
                            + ("SET plan_cache_mode = force_generic_plan" if generic else "RESET plan_cache_mode"))
        try:
            for b in range(args.blocks):
                for generic in ((True, False) if b % 2 == 0 else (False, True)):
                    mode(generic)
                    for label, td in picks.items():
                        run, qs = L.Runner(app, td.tenant_id), queries[label]
                        lo = (b * (args.block + 1)) % max(1, len(qs) - args.block - 1)
                        for i, q in enumerate(qs[lo:lo + args.block + 1]):
                            for method in ("hybrid_retrieve", "client_fusion"):
                                el = getattr(run, method)(q)[0]
                                if i:
                                    key = f"{label} {method} {'once a session' if generic else 'every call'}"
                                    ms.setdefault(key, {}).setdefault("ms", []).append(1000 * el)
        finally:
            mode(True)
    out: dict[str, object] = {}
    for label in picks:
        for method in ("hybrid_retrieve", "client_fusion"):
            g = ms[f"{label} {method} once a session"]["ms"]
            o = ms[f"{label} {method} every call"]["ms"]
            out[f"{label} {method}"] = {
                "n": len(g), "once_a_session_p50_p95_mean_ms": [round(pct(g, 50), 2), round(pct(g, 95), 2), round(statistics.fmean(g), 2)],
                "every_call_p50_p95_mean_ms": [round(pct(o, 50), 2), round(pct(o, 95), 2), round(statistics.fmean(o), 2)],
                "ratio_p50": round(pct(g, 50) / pct(o, 50), 3), "ratio_mean": round(statistics.fmean(g) / statistics.fmean(o), 3)}
            print(label, method, out[f"{label} {method}"], flush=True)
    write_result(args.out, meta, {"helpers": HELPERS, "blocks": args.blocks, "block": args.block, "results": out})


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"done in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
