"""One-off: two engines' sql/idempotent/ side by side on a kept 1M database (a latency.py --keep-db run).

Rounds alternate the engines ABBA (each round installs its engine's idempotent SQL on the database, then
measures every query of both tenants through hybrid_retrieve as the app role); the first round of each
engine warms it and is not pooled. Every query's rows (ids and scores) are compared between the engines.

    git archive <commit> sql | tar -x -C /tmp/engine_a
    python bench/engine_ab.py --data-dir /path/to/kept/server --a /tmp/engine_a --b . --rounds 6
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latency as L  # noqa: E402
from _common import control_ms, pct, start_meta, write_result  # noqa: E402

CALL = ("SELECT * FROM hybrid_retrieve(query_embedding => %s, query_text => %s, graph_seeds => %s, top_k => 10, "
        "rrf_k => 60, vector_weight => 1, keyword_weight => 1, graph_weight => 0.5)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--a", type=Path, required=True, help="engine A: a tree holding sql/idempotent/")
    ap.add_argument("--b", type=Path, default=Path(__file__).resolve().parent.parent, help="engine B (the checkout)")
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "engine_ab.json")
    args = ap.parse_args()
    meta = start_meta("engine_ab")
    admin = L.start_embedded(args.data_dir)
    db, app = L.dsn_for(admin, f"bench_latency_{args.size}"), L.dsn_for(admin, f"bench_latency_{args.size}", L.APP_ROLE)
    world, _, sizes, tenants = L.generate(args.seed, args.size)
    picks = {label: tenants[i] for label, i in L.choose_picks(sizes)}
    queries = {label: L.make_queries(world, td, args.queries, np.random.default_rng(args.seed + 77))
               for label, td in picks.items()}

    def install(tree: Path) -> None:
        with psycopg.connect(db) as c:
            for f in sorted((tree / "sql" / "idempotent").glob("*.sql")):
                c.execute(f.read_text(encoding="utf-8"))

    ms: dict[tuple[str, str], list[list[float]]] = {}
    rows: dict[tuple[str, int], dict[str, list[tuple[str, float]]]] = {}
    controls = []
    try:
        for r in range(args.rounds):
            for eng in (("A", "B") if r % 2 == 0 else ("B", "A")):
                install(args.a if eng == "A" else args.b)
                with psycopg.connect(app) as c:
                    register_vector(c)
                    for label, td in picks.items():
                        ts = []
                        for i, q in enumerate(queries[label]):
                            t0 = time.perf_counter()
                            with c.transaction():
                                c.execute("SELECT set_config('hybrid.tenant_id', %s, true)", (td.tenant_id,))
                                got = c.execute(CALL, (q.vector, q.text, q.seeds)).fetchall()
                            ts.append(1000 * (time.perf_counter() - t0))
                            rows.setdefault((label, i), {}).setdefault(eng, [(x[0], round(x[4], 9)) for x in got])
                        ms.setdefault((label, eng), []).append(ts)
                controls.append(control_ms())
                print(f"round {r} engine {eng}: control {controls[-1]:.1f} ms", flush=True)
    finally:
        install(args.b)
    out: dict[str, object] = {"rows_differ": sum(1 for v in rows.values() if len(v) == 2 and v["A"] != v["B"]),
                              "queries_compared": len(rows), "controls_ms": controls}
    for label in picks:
        for eng in "AB":
            pooled = [x for rnd in ms[(label, eng)][1:] for x in rnd]
            out[f"{label} {eng}"] = {"p50_ms": round(pct(pooled, 50), 2), "p95_ms": round(pct(pooled, 95), 2),
                                     "mean_ms": round(statistics.fmean(pooled), 2),
                                     "round_means_ms": [round(statistics.fmean(x), 2) for x in ms[(label, eng)]]}
        a, b = out[f"{label} A"], out[f"{label} B"]
        out[f"{label} B/A"] = {k: round(b[k] / a[k], 3) for k in ("p50_ms", "p95_ms", "mean_ms")}  # type: ignore[index]
        print(label, a, b, out[f"{label} B/A"], flush=True)
    print("queries whose rows differ:", out["rows_differ"], "of", out["queries_compared"])
    write_result(args.out, meta, {"a": str(args.a), "b": str(args.b), "rounds": args.rounds, "queries": args.queries,
                                  "results": out})


if __name__ == "__main__":
    main()
